"""Partial rollouts against the real demo (simulated engines, the whole gateway on 127.0.0.1): a rollout loop is
interrupted by a weight switch in abort mode (``switch_weights``), each sample is resumed on the new weights with the
rest of its budget, and every sample says which output tokens each version produced. Abort by rid through the gateway and
from the direct client. The ``Sample`` bookkeeping itself is checked on answers shaped as SGLang's."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest

from uis_client import UisClient
from uis_client.direct import DirectClient
from uis_client.rollout import Sample, VersionSpan

from .conditions import wait_until

#: 6 s of the demo's 4 ms decode steps: long enough that the abort lands while every request still runs.
BUDGET = 1500
PROMPT = [11, 12, 13, 14]


def _sample(i: int) -> Sample:
    return Sample([*PROMPT, i], {"max_new_tokens": BUDGET, "ignore_eos": True, "temperature": 0}, model="policy")


def _at_engines(client: UisClient) -> int:
    """Requests the policy's engines hold now (SGLang's /v1/loads): an abort sent once they hold them reaches them."""
    total = 0
    for e in client.engines("rollout").models["policy"].engines:
        loads = httpx.get(f"{e.base_url}/v1/loads").json()["loads"]
        total += sum(x["num_running_reqs"] + x["num_waiting_reqs"] for x in loads)
    return total


def _resident(client: UisClient) -> str:
    """Rollout's phase is resident; the policy's version now."""
    client.wait_barrier("rollout", group="actor")
    version = client.engines("rollout").models["policy"].weight_version
    assert version is not None
    return version


def test_a_rollout_loop_interrupted_by_a_weight_switch_is_resumed_and_every_sample_carries_its_versions(
    client: UisClient,
) -> None:
    before = _resident(client)
    after = f"resume-{uuid.uuid4().hex[:8]}"
    via_gateway = [_sample(i) for i in range(4)]
    direct_samples = [_sample(10 + i) for i in range(4)]
    with client.direct("rollout") as direct, ThreadPoolExecutor(max_workers=8) as pool:
        running: list[Future[Sample]] = [pool.submit(client.generate_sample, "rollout", s) for s in via_gateway]
        running += [pool.submit(direct.generate_sample, s, stream=True) for s in direct_samples]
        # The engines hold every request and the streamed ones have tokens: the engines are decoding.

        def decoding() -> bool:
            for f in running:
                if f.done():
                    raise AssertionError(f"a request ended before the switch: {f.result()}")
            return _at_engines(client) >= 8 and all(len(s.output_ids) >= 5 for s in direct_samples)

        wait_until(decoding, what="8 requests at the engines, tokens in every stream")
        # The weight switch in abort mode: what runs is aborted (each caller gets its partial output), every replica
        # updated, then admission again.
        switched = client.switch_weights(
            "rollout", "policy", "abort", {"source": "disk", "model_path": "/ckpt/resumed", "weight_version": after}
        )
        assert (switched.outcome, switched.weight_version, switched.from_version) == ("switched", after, before)
        for f in running:
            f.result(timeout=60)
        samples = via_gateway + direct_samples
        for s in samples:
            assert s.aborted and s.interrupted, (s.rid, s.finish_reason)
            assert len(s.output_ids) < BUDGET
            assert {sp.version for sp in s.spans} <= {before}
        first_lengths = {s.rid: len(s.output_ids) for s in samples}
        # Resumed on the new weights: prompt + partial output as input, the rest of the budget.
        resumed = [pool.submit(client.resume, "rollout", s, min_weight_version=after) for s in via_gateway]
        resumed += [pool.submit(direct.resume, s, min_weight_version=after) for s in direct_samples]
        for f in resumed:
            f.result(timeout=120)
    assert sum(1 for s in samples if first_lengths[s.rid] > 0) >= len(direct_samples)
    for s in samples:
        k = first_lengths[s.rid]
        assert s.finished and s.finish_reason == {"type": "length", "length": BUDGET - k}
        assert len(s.output_ids) == BUDGET and s.attempts == 2
        expected = [VersionSpan(before, 0, k), VersionSpan(after, k, BUDGET)] if k else [VersionSpan(after, 0, BUDGET)]
        assert s.spans == expected
        assert s.mask(after) == [False] * k + [True] * (BUDGET - k)
        assert s.version_of(BUDGET - 1) == after


def test_abort_by_rid_through_the_gateway_and_from_the_direct_client(client: UisClient) -> None:
    _resident(client)
    sample = _sample(20)
    with ThreadPoolExecutor(max_workers=2) as pool:
        future = pool.submit(client.generate_sample, "rollout", sample)
        wait_until(lambda: _at_engines(client) == 1, what="the request at its engine")
        assert client.abort("rollout", sample.rid) is True
        assert future.result(timeout=60).aborted
    assert sample.finish_reason is not None and sample.finish_reason["type"] == "abort"
    assert client.abort("rollout", sample.rid) is False  # ended: nothing to abort
    with client.direct("rollout") as direct:
        streamed = _sample(21)
        done = threading.Event()

        def run() -> None:
            try:
                direct.generate_sample(streamed, stream=True)
            finally:
                done.set()

        threading.Thread(target=run, daemon=True).start()
        wait_until(lambda: len(streamed.output_ids) >= 3, what="streamed tokens")
        assert direct.abort(streamed.rid) is True
        assert done.wait(60)
        assert streamed.aborted and 3 <= len(streamed.output_ids) < BUDGET
        assert direct.abort(streamed.rid) is False
    # Resumed once the abort is over: the rest of the budget, same rid.
    client.resume("rollout", streamed)
    assert streamed.finished and len(streamed.output_ids) == BUDGET


def _answer(ids: list[int], version: str, finish: dict[str, object] | None, **meta: object) -> dict[str, object]:
    return {"text": "x" * len(ids), "output_ids": ids, "meta_info": {"weight_version": version, "finish_reason": finish, **meta}}


def test_sample_bookkeeping_on_sglang_shaped_answers() -> None:
    s = Sample([1, 2], {"max_new_tokens": 10, "min_new_tokens": 4}, rid="r-1")
    assert s.request() == {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 10, "min_new_tokens": 4}, "rid": "r-1"}
    s.absorb(_answer([7, 8, 9], "v1", {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}))
    assert s.interrupted and s.remaining == 7
    assert s.request()["input_ids"] == [1, 2, 7, 8, 9]
    assert s.request()["sampling_params"] == {"max_new_tokens": 7, "min_new_tokens": 1}
    # An attempt across an in-place switch reports SGLang's weight_versions spans (offsets within the attempt).
    spans = [{"version": "v1", "start": 0, "end": 2}, {"version": "v2", "start": 2, "end": 7}]
    s.absorb(_answer([1] * 7, "v2", {"type": "length", "length": 7}, weight_versions=spans))
    assert s.finished and not s.interrupted
    assert s.spans == [VersionSpan("v1", 0, 5), VersionSpan("v2", 5, 10)]
    assert s.versions == ["v1", "v2"] and s.mask("v1") == [True] * 5 + [False] * 5
    with pytest.raises(IndexError):
        s.version_of(10)
    # A stream's chunks repeat the attempt's output so far; a cut stream keeps what arrived.
    t = Sample([1], {"max_new_tokens": 6})
    mark = t.begin_stream()
    t.absorb(_answer([4], "v1", None), stream_from=mark)
    t.absorb(_answer([4, 5], "v1", None), stream_from=mark)
    assert (t.output_ids, t.text, t.spans, t.interrupted) == ([4, 5], "xx", [VersionSpan("v1", 0, 2)], True)
    mark = t.begin_stream()
    t.absorb(_answer([6, 7, 8, 9], "v2", {"type": "length", "length": 4}), stream_from=mark)
    assert t.output_ids == [4, 5, 6, 7, 8, 9] and t.attempts == 2 and t.finished
    assert t.spans == [VersionSpan("v1", 0, 2), VersionSpan("v2", 2, 6)]
    with pytest.raises(ValueError, match="prompt token ids"):
        Sample([], {})


def test_a_rollout_spanning_an_in_place_switch_records_the_output_token_where_the_version_changed(
    client: UisClient,
) -> None:
    """A pause_in_place switch under a rollout: nothing is aborted, each request finishes on the new weights, and
    each sample's spans split its output at the token where the version changed (SGLang's ``weight_versions``, which
    the gateway passes on). The index is checked against the stream itself: each streamed chunk carries the version
    of the engine when it was sent, one chunk per token."""
    before = _resident(client)
    after = f"inplace-{uuid.uuid4().hex[:8]}"
    via_gateway = [_sample(30 + i) for i in range(3)]
    direct_samples = [_sample(40 + i) for i in range(3)]
    chunk_versions: dict[str, list[tuple[int, str]]] = {s.rid: [] for s in direct_samples}

    def streamed(direct: DirectClient, s: Sample) -> Sample:
        mark = s.begin_stream()
        for chunk in direct.generate_stream(s.request()):
            meta = chunk["meta_info"]
            chunk_versions[s.rid].append((int(meta["completion_tokens"]), str(meta["weight_version"])))
            s.absorb(chunk, stream_from=mark)
        return s

    with client.direct("rollout") as direct, ThreadPoolExecutor(max_workers=6) as pool:
        running = [pool.submit(client.generate_sample, "rollout", s) for s in via_gateway]
        running += [pool.submit(streamed, direct, s) for s in direct_samples]

        def decoding() -> bool:
            for f in running:
                if f.done():
                    raise AssertionError(f"a request ended before the switch: {f.result()}")
            return _at_engines(client) >= 6 and all(len(s.output_ids) >= 5 for s in direct_samples)

        wait_until(decoding, what="6 requests at the engines, tokens in every stream")
        switched = client.switch_weights(
            "rollout", "policy", "pause_in_place", {"source": "disk", "model_path": "/ckpt/inplace", "weight_version": after}
        )
        assert (switched.outcome, switched.weight_version, switched.from_version) == ("switched", after, before)
        for f in running:
            f.result(timeout=120)
    for s in via_gateway + direct_samples:
        assert s.finished and s.attempts == 1 and len(s.output_ids) == BUDGET, (s.rid, s.finish_reason)
        assert s.versions[-1] == after
        assert s.spans[0].start == 0 and s.spans[-1].end == BUDGET
        k = s.spans[0].end if s.versions == [before, after] else 0
        assert s.mask(after) == [False] * k + [True] * (BUDGET - k)
    for s in direct_samples:
        # Every streamed sample had tokens before the switch: both versions, split where the chunks changed version.
        seen = chunk_versions[s.rid]
        last_old = max(n for n, v in seen if v == before)
        assert all(v == after for n, v in seen if n > last_old)
        assert s.spans == [VersionSpan(before, 0, last_old), VersionSpan(after, last_old, BUDGET)]
        assert last_old >= 5


def test_sample_of_an_attempt_on_several_versions_without_spans_has_an_unknown_version() -> None:
    s = Sample([1, 2], {"max_new_tokens": 4})
    s.absorb(_answer([5, 6, 7, 8], "v2", {"type": "length", "length": 4}, uis_weight_versions=["v1", "v2"]))
    assert s.spans == [VersionSpan(None, 0, 4)] and s.mask("v2") == [False] * 4


def test_a_stream_without_spans_is_split_where_its_chunks_change_version() -> None:
    """An older release's stream across an in-place switch: each chunk's new tokens are recorded under the chunk's
    weight_version (one chunk per token), so the split is where the engine's version changed; a finished chunk with
    SGLang's spans replaces what the chunks said."""
    s = Sample([1], {"max_new_tokens": 4})
    mark = s.begin_stream()
    for ids, version in (([4], "v1"), ([4, 5], "v1"), ([4, 5, 6], "v2")):
        s.absorb(_answer(ids, version, None), stream_from=mark)
    s.absorb(_answer([4, 5, 6, 7], "v2", {"type": "length", "length": 4}), stream_from=mark)
    assert s.spans == [VersionSpan("v1", 0, 2), VersionSpan("v2", 2, 4)] and s.finished
    t = Sample([1], {"max_new_tokens": 3})
    mark = t.begin_stream()
    t.absorb(_answer([4], "v1", None), stream_from=mark)
    spans = [{"version": "v0", "start": 0, "end": 1}, {"version": "v1", "start": 1, "end": 3}]
    t.absorb(_answer([4, 5, 6], "v1", {"type": "length", "length": 3}, weight_versions=spans), stream_from=mark)
    assert t.spans == [VersionSpan("v0", 0, 1), VersionSpan("v1", 1, 3)]
