"""The shared routing vectors (``packages/routing/vectors``): the TypeScript routing tests read the same files, so
the Python DirectClient's decisions are the gateway's."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from uis_client.discovery import check_snapshot
from uis_client.errors import UisError
from uis_client.discovery import DiscoverySnapshot
from uis_client.routing import ReplicaSelector, StalenessBound, StalenessRule, compare_weight_versions, request_keys, route

VECTORS = Path(__file__).resolve().parents[3] / "packages" / "routing" / "vectors"
FILES = sorted(VECTORS.glob("*.json"))


def _cases() -> list[Any]:
    out = []
    for path in FILES:
        data = json.loads(path.read_text())
        for case in data["cases"]:
            out.append(pytest.param(data, case["steps"], id=f"{path.stem}: {case['name']}"))
    return out


def _decide(snapshot: object, selector: ReplicaSelector, step: dict[str, Any]) -> dict[str, Any]:
    keys = request_keys(step["body"], step.get("headers") or {})
    routed = route(snapshot, keys, selector, set(step.get("exclude") or []))
    if isinstance(routed, UisError):
        error: dict[str, Any] = {"code": routed.code, "status": routed.status}
        if routed.path is not None:
            error["path"] = routed.path
        if isinstance(routed.details, dict) and "retry_after_s" in routed.details:
            error["retry_after_s"] = routed.details["retry_after_s"]
        return {"error": error}
    _, sel = routed
    return {"model": sel.model, "engine_id": sel.engine_id, "url": sel.url, "reason": sel.reason}


def _subset(actual: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    if "error" in expected and "error" in actual:
        return {"error": {k: actual["error"].get(k) for k in expected["error"]}}
    if "error" in expected or "error" in actual:
        return actual
    return {k: actual.get(k) for k in expected}


def test_vectors_exist() -> None:
    assert len(FILES) >= 2, f"no routing vectors under {VECTORS}"


@pytest.mark.parametrize(("data", "steps"), _cases())
def test_vector(data: dict[str, Any], steps: list[dict[str, Any]]) -> None:
    selector = ReplicaSelector()
    # One rule per case, as the gateway and a DirectClient keep one: it sees every snapshot in order.
    staleness = StalenessRule()
    bounds: list[StalenessBound] = []
    snapshot: object = None
    for i, step in enumerate(steps):
        at = f"step {i}"
        if "snapshot" in step:
            raw = copy.deepcopy(data["snapshots"][step["snapshot"]])
            checked = check_snapshot(raw)
            # A valid snapshot is validated once, as the client does; a malformed one is routed raw.
            snapshot = raw if isinstance(checked, UisError) else checked
            bounds = staleness.bounds(checked) if isinstance(checked, DiscoverySnapshot) else []
        elif "in_flight" in step:
            bound = next((b for b in bounds if b.model == step["in_flight"]["model"]), None)
            stale = [bound is not None and bound.is_stale(v) for v in step["in_flight"]["started_on"]]
            assert stale == step["expect_stale"], at
        elif "acquire" in step:
            selector.acquire(step["acquire"])
        elif "release" in step:
            selector.release(step["release"])
        elif "compare" in step:
            a, b, sign = step["compare"]
            result = compare_weight_versions(a, b)
            assert (result > 0) - (result < 0) == sign, f"{at}: compare {a!r} {b!r}"
        elif "expect_engines" in step:
            picked = [_decide(snapshot, selector, step["route"]).get("engine_id") for _ in step["expect_engines"]]
            assert picked == step["expect_engines"], at
        else:
            actual = _decide(snapshot, selector, step["route"])
            assert _subset(actual, step["expect"]) == step["expect"], at
