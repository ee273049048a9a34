"""Weights from tensors against the demo's simulated engines: the replicas command, the push of
``update_weights_from_tensor`` to every replica, the version commit that discovery and routing follow."""

from __future__ import annotations

import base64

import httpx
import pytest

from uis_client import ConflictError, UisClient
from uis_client.models import ModelReplica


def _serialized(replica: ModelReplica) -> list[str]:
    # Stand-ins for MultiprocessingSerializer output: one string per TP rank, naming where it goes.
    return [base64.b64encode(f"{replica.engine_id}:{r.node}:{r.gpu_id}".encode()).decode() for r in replica.ranks]


def test_replicas_name_urls_ranks_nodes_and_gpus(client: UisClient) -> None:
    answer = client.list_replicas("rollout", "policy")
    published = {e.engine_id: e.base_url for e in client.engines("rollout").models["policy"].engines}
    assert {r.engine_id: r.url for r in answer.replicas} == published
    for r in answer.replicas:
        assert [x.rank for x in r.ranks] == list(range(r.gpus_per_engine))
        assert r.tp * r.pp == r.gpus_per_engine
        assert all(x.node.startswith("node-") for x in r.ranks)
    gpus = [(x.node, x.gpu_id) for r in answer.replicas for x in r.ranks]
    assert len(gpus) == len(set(gpus))  # no GPU twice


def test_push_to_every_replica_then_commit_the_version(client: UisClient) -> None:
    pushed = client.push_tensor_weights("rollout", "policy", "tensor-7", _serialized)
    replicas = client.list_replicas("rollout", "policy")
    assert sorted(pushed.engines) == sorted(r.engine_id for r in replicas.replicas)
    assert replicas.weight_version == "tensor-7"
    snap = client.engines("rollout")
    assert snap.models["policy"].weight_version == "tensor-7"
    assert {e.weight_version for e in snap.models["policy"].engines} == {"tensor-7"}
    for r in replicas.replicas:  # the engines themselves report it
        assert r.url is not None
        # /get_weight_version where the release has it (0.5.23 dropped it), else model info's weight_version.
        answer = httpx.get(f"{r.url}/get_weight_version")
        if answer.status_code == 404:
            answer = httpx.get(f"{r.url}/model_info")
        assert answer.json()["weight_version"] == "tensor-7"
    with client.direct("rollout") as direct:  # routing follows: every replica qualifies
        picked = {direct.pick({"model": "policy"}, {"X-Min-Weight-Version": "tensor-7"})[1].engine_id for _ in range(8)}
    assert picked == {r.engine_id for r in replicas.replicas}


def test_a_wrong_rank_count_pushes_nothing(client: UisClient) -> None:
    before = client.engines("rollout").models["policy"].weight_version
    with pytest.raises(ValueError, match="one serialized entry per TP rank"):
        client.push_tensor_weights("rollout", "policy", "never", lambda r: ["x"] * (r.tp + 1))
    assert client.engines("rollout").models["policy"].weight_version == before


def test_a_sleeping_model_cannot_take_tensors(client: UisClient) -> None:
    with pytest.raises(ConflictError) as info:
        client.push_tensor_weights("genrm", "judge", "never", _serialized)
    assert info.value.code == "replica_not_ready"
    assert all(s.endswith("=sleeping") for s in info.value.details["replicas"])
