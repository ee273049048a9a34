"""The DirectClient against the real demo: the routing decisions are those of the shared vectors (checked in
test_vectors.py); here they meet live discovery and real engines."""

from __future__ import annotations

import pytest

from uis_client import BadRequestError, UisClient, UnavailableError


def test_round_robin_over_the_live_replicas_in_discovery_order(client: UisClient) -> None:
    with client.direct("rollout") as direct:
        engines = [e.engine_id for e in direct.snapshot.models["policy"].engines]
        picked = [direct.pick({"model": "actor"})[1].engine_id for _ in range(2 * len(engines))]
        assert picked == engines + engines


def test_generate_chat_and_stream_go_to_the_engines(client: UisClient) -> None:
    with client.direct("rollout") as direct:
        out = direct.generate({"route_key": "code", "text": "def f():", "sampling_params": {"max_new_tokens": 6}})
        assert isinstance(out["text"], str) and out["meta_info"]["completion_tokens"] > 0
        chat = direct.chat_completions({"model": "actor", "messages": [{"role": "user", "content": "hi"}]})
        assert chat["model"] == "policy"  # the alias was rewritten to the served name
        chunks = list(direct.chat_completions_stream({"messages": [{"role": "user", "content": "count"}]}))
        assert len(chunks) > 1
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert text
        assert all(direct.selector.in_flight(e.engine_id) == 0 for e in direct.snapshot.models["policy"].engines)


def test_local_errors_match_the_gateway(client: UisClient) -> None:
    with client.direct("rollout", watch=False) as direct:
        with pytest.raises(BadRequestError) as info:
            direct.generate({"model": "nope", "text": "x"})
        assert (info.value.code, info.value.path) == ("model_not_served", "body.model")
        with pytest.raises(UnavailableError) as version:
            direct.generate({"text": "x"}, headers={"X-Min-Weight-Version": "zzz-not-served"})
        assert version.value.code == "no_replica_at_version"
        assert version.value.retry_after == 1
