"""OpenAI streams through the real demo's gateway carry the versions that made their tokens: a pause_in_place switch
while the engine stands at a known output token of a stream (the simulator's break point, ``/sim/faults``), and the
spans the client reads (each chunk's ``system_fingerprint``, the ``uis_weight_versions`` event after ``[DONE]``) split
the answer exactly there. The reading itself is checked on events shaped as the gateway's."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from uis_client import AsyncUisClient, UisClient
from uis_client.openai_stream import AsyncOpenAIStream, OpenAIStream, OpenAIStreamVersions
from uis_client.rollout import VersionSpan

from .conditions import wait_until
from .conftest import Service

AT = 5
N = 30


def _faults(engines: list[str], **change: object) -> list[dict[str, Any]]:
    out = []
    for url in engines:
        answer = httpx.post(f"{url}/sim/faults", json=change)
        answer.raise_for_status()
        out.append(answer.json())
    return out


CHAT = {"messages": [{"role": "user", "content": "a"}]}


@pytest.mark.parametrize(
    ("kind", "body", "counted"),
    [
        # As the OpenAI SDKs send it: no token counts, only the event after [DONE] gives the index.
        ("chat_completions", CHAT, False),
        # Continuous usage: the chunks' own counts split it too.
        ("completions", {"prompt": "b", "stream_options": {"continuous_usage_stats": True}}, True),
        ("async chat_completions", CHAT, False),
    ],
)
def test_an_openai_stream_across_an_in_place_switch_is_split_at_the_token_the_engine_stood_at(
    client: UisClient, service: Service, kind: str, body: dict[str, Any], counted: bool
) -> None:
    client.wait_barrier("rollout", group="actor")
    policy = client.engines("rollout").models["policy"]
    before = policy.weight_version
    engines = [e.base_url for e in policy.engines if e.base_url is not None]
    rid = f"oa-{kind.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
    method = f"{kind.removeprefix('async ')}_stream"
    after = f"oa-{uuid.uuid4().hex[:8]}"
    request = {"model": "policy", "rid": rid, "max_tokens": N, "ignore_eos": True, **body}
    up_to_done = OpenAIStreamVersions()
    chunks: list[dict[str, Any]] = []
    _faults(engines, break_at={"rid": rid, "tokens": AT})
    streams: list[OpenAIStream | AsyncOpenAIStream] = []

    def read() -> None:
        stream: OpenAIStream = getattr(client, method)("rollout", request)
        streams.append(stream)
        for chunk in stream:
            chunks.append(chunk)
            up_to_done.add(chunk)

    async def read_async() -> None:
        async with AsyncUisClient(service.url, admin_token=service.token) as c:
            stream: AsyncOpenAIStream = await getattr(c, method)("rollout", request)
            streams.append(stream)
            async for chunk in stream:
                chunks.append(chunk)
                up_to_done.add(chunk)

    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            reading = pool.submit(asyncio.run, read_async()) if kind.startswith("async") else pool.submit(read)
            wait_until(lambda: any(f["at_break"] for f in _faults(engines)), what=f"the engine at token {AT} of {rid}")
            switched = client.switch_weights(
                "rollout",
                "policy",
                "pause_in_place",
                {"source": "disk", "model_path": f"/ckpt/{after}", "weight_version": after},
            )
            assert (switched.outcome, switched.weight_version) == ("switched", after)
            _faults(engines, unbreak=True)
            reading.result(timeout=60)
    finally:
        _faults(engines, unbreak=True)

    truth = [VersionSpan(before, 0, AT), VersionSpan(after, AT, N)]
    [stream] = streams
    assert stream.spans == truth
    assert stream.versions.versions == [before, after]
    # The chunks are the answer's (no event in them), each with the version that made it.
    assert all("choices" in c for c in chunks)
    assert {c.get("system_fingerprint") for c in chunks} == {before, after}
    # A reader that stopped at [DONE] has only the fingerprints: without counts no index, and it says so.
    assert up_to_done.spans == (truth if counted else [VersionSpan(None, 0, N)])

    # One version: no event, the fingerprints name every token's version.
    with getattr(client, method)(
        "rollout", {**request, "rid": f"{rid}-plain", "max_tokens": 4}
    ) as plain:
        assert len(list(plain)) >= 4
    assert plain.spans == [VersionSpan(after, 0, 4)]


def _chat(content: str, fingerprint: str) -> dict[str, Any]:
    delta = {"content": content} if content else {"role": "assistant"}
    return {"choices": [{"index": 0, "delta": delta}], "system_fingerprint": fingerprint, "usage": None}


def test_versions_without_an_index_are_recorded_as_unknown_not_guessed() -> None:
    events = [_chat("", "v1"), _chat("a", "v1"), _chat("b", "v1"), _chat("c", "v2")]
    with_index = OpenAIStreamVersions()
    names_only = OpenAIStreamVersions()
    for e in events:
        with_index.add(e)
        names_only.add(e)
    spans = [{"version": "v1", "start": 0, "end": 2}, {"version": "v2", "start": 2, "end": 3}]
    with_index.add({"weight_version": "v2", "weight_versions": spans})
    assert with_index.spans == [VersionSpan("v1", 0, 2), VersionSpan("v2", 2, 3)]
    # SGLang 0.5.2 (no counts) and n > 1 (each choice counts its own): the gateway names the versions only.
    names_only.add({"weight_version": "v2", "uis_weight_versions": ["v1", "v2"]})
    assert names_only.spans == [VersionSpan(None, 0, 3)] and names_only.versions == [None]
