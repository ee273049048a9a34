"""The DirectClient's requests in flight, against a real sglang-sim process and a discovery server on 127.0.0.1 (no
gateway: these requests bypass it): an abort that the engine drops because it came before the engine registered the
rid is sent again until it lands, and a request that falls more than its model's ``max_staleness`` behind the newest
version is aborted with its partial output and resumed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from uis_client import UisClient, UnavailableError
from uis_client.direct import DirectClient
from uis_client.rollout import Sample, VersionSpan

from .conditions import wait_until

REPO = Path(__file__).resolve().parents[3]
SIM_BIN = REPO / "packages/sglang-sim/bin/sglang-sim.mjs"
#: 10 ms per token: a request of BUDGET tokens runs 4 s, long enough to still run when it is aborted.
BUDGET = 400


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    """A sglang-sim process on a free port of 127.0.0.1, serving weight version 1; its URL."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the tests run against a real sglang-sim process")
    proc = subprocess.Popen(
        [node, str(SIM_BIN), "--model-path", "sim/tiny", "--served-model-name", "policy", "--host", "127.0.0.1",
         "--port", "0", "--weight-version", "1", "--sim-decode-us-per-token", "10000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    url = None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if line == "":
            break
        seen.append(line)
        match = re.search(r"Uvicorn running on (http://\S+)", line)
        url = match.group(1) if match else url
        if url is not None and "The server is fired up and ready to roll!" in line:
            break
    try:
        if url is None or "ready to roll" not in "".join(seen):
            pytest.fail(f"sglang-sim did not start: {''.join(seen)[-2000:]}")
        # The log is not read after the start: drain it so a full pipe never blocks the engine.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


class Discovery:
    """``GET /rollout/engines`` on 127.0.0.1: the snapshot published last (model ``policy``, max_staleness 1)."""

    def __init__(self) -> None:
        self.snapshot: dict[str, Any] = {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = json.dumps(owner.snapshot).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def publish(self, revision: int, model: str, engine: str, *urls: str) -> None:
        self.snapshot = {
            "schema_version": 2,
            "role": "rollout",
            "topology_revision": revision,
            "registry_epoch": "e1",
            "phase": None,
            "models": {
                "policy": {
                    "state": "ready",
                    "router_url": None,
                    "weight_version": model,
                    "max_staleness": 1,
                    "engines": [
                        {"engine_id": f"policy/{i}", "base_url": url, "state": "ready", "direct_eligible": True,
                         "weight_version": engine}
                        for i, url in enumerate(urls)
                    ],
                }
            },
            "routing": {"default_model": "policy", "route_keys": {}, "aliases": {}, "policy": "round_robin",
                        "model_policies": {}},
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def discovery(sim: str) -> Iterator[Discovery]:
    d = Discovery()
    d.publish(1, "1", "1", sim)
    try:
        yield d
    finally:
        d.close()


@pytest.fixture()
def direct(discovery: Discovery) -> Iterator[DirectClient]:
    # watch=False: the test says when the client reads discovery (refresh), so each topology is seen in order.
    with UisClient(discovery.url) as uis, uis.direct("rollout", watch=False) as d:
        yield d


def _faults(sim: str, **change: object) -> dict[str, Any]:
    answer = httpx.post(f"{sim}/sim/faults", json=change) if change else httpx.get(f"{sim}/sim/faults")
    answer.raise_for_status()
    data: dict[str, Any] = answer.json()
    return data


def _stats(sim: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{sim}/sim/stats").json()
    return data


def _sample(i: int) -> Sample:
    return Sample([11, 12, 13, i], {"max_new_tokens": BUDGET, "ignore_eos": True, "temperature": 0})


def test_an_abort_the_engine_drops_before_it_registered_the_rid_is_sent_again_until_it_lands(
    sim: str, direct: DirectClient
) -> None:
    sample = _sample(1)
    aborted_before = _stats(sim)["aborted"]
    _faults(sim, hold_arrivals=True)
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(direct.generate_sample, sample)
            # The race: the engine has the request and has not registered its rid, so it drops an abort of it.
            wait_until(lambda: _faults(sim)["arrivals_waiting"] == 1, what="the request held before registration")
            assert direct.abort(sample.rid) is True
            wait_until(lambda: direct.aborts_resending == 1, what="the abort being sent again")
            assert _stats(sim)["aborted"] == aborted_before  # dropped, every time so far
            _faults(sim, hold_arrivals=False)
            # Without the re-sends the request would run its BUDGET tokens and end with finish_reason length.
            running.result(timeout=60)
    finally:
        _faults(sim, hold_arrivals=False)
    assert sample.aborted and len(sample.output_ids) < BUDGET, sample.finish_reason
    assert _stats(sim)["aborted"] == aborted_before + 1
    wait_until(lambda: direct.aborts_resending == 0, what="the re-sends to stop with the answer")
    assert direct.abort(sample.rid) is False
    direct.resume(sample)
    assert sample.finished and len(sample.output_ids) == BUDGET


def test_a_request_more_than_max_staleness_behind_is_aborted_with_its_partial_output_and_resumed(
    sim: str, discovery: Discovery, direct: DirectClient
) -> None:
    direct.refresh()
    old, recent = _sample(2), _sample(3)
    with ThreadPoolExecutor(max_workers=2) as pool:
        old_run = pool.submit(direct.generate_sample, old, stream=True)
        wait_until(lambda: len(old.output_ids) >= 3, what="tokens of the request started on version 1")
        # Version 2: the request that started on 1 is one behind, within the bound.
        discovery.publish(2, "2", "2", sim)
        direct.refresh()
        recent_run = pool.submit(direct.generate_sample, recent, stream=True)
        wait_until(lambda: len(recent.output_ids) >= 3, what="tokens of the request started on version 2")
        assert not old_run.done()
        # Version 3: the one started on 1 is two behind (aborted at its engine), the one started on 2 one behind.
        discovery.publish(3, "3", "3", sim)
        direct.refresh()
        old_run.result(timeout=60)
        assert old.aborted and 3 <= len(old.output_ids) < BUDGET, old.finish_reason
        assert not recent_run.done()
        assert direct.abort(recent.rid) is True
        recent_run.result(timeout=60)
    # The engine moves to version 3; the aborted sample is resumed there with the rest of its budget.
    moved = httpx.post(f"{sim}/update_weights_from_disk", json={"model_path": "/ckpt/3", "weight_version": "3"})
    assert moved.status_code == 200, moved.text
    k = len(old.output_ids)
    direct.resume(old, min_weight_version="3")
    assert old.finished and len(old.output_ids) == BUDGET and old.attempts == 2
    assert old.spans == [VersionSpan("1", 0, k), VersionSpan("3", k, BUDGET)]


def test_an_aborted_request_whose_engine_then_answers_503_is_not_sent_to_another_replica(
    sim: str, discovery: Discovery, direct: DirectClient
) -> None:
    """An engine going away holds the generation until the abort comes, then answers it 503."""
    held: list[threading.Event] = []
    arrived = threading.Event()

    class Stub(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path == "/generate":
                gone = threading.Event()
                held.append(gone)
                arrived.set()
                gone.wait(60)
                self.send_response(503)
            else:
                self.send_response(200)
                for gone in held:
                    gone.set()
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    try:
        # Round robin: the stub (policy/0) first; the sim (policy/1) would take a retry.
        discovery.publish(10, "1", "1", f"http://127.0.0.1:{stub.server_address[1]}", sim)
        direct.refresh()
        requests_before = _stats(sim)["requests"]
        sample = _sample(4)
        with ThreadPoolExecutor(max_workers=1) as pool:
            running = pool.submit(direct.generate_sample, sample)
            assert arrived.wait(30)
            assert direct.abort(sample.rid) is True
            with pytest.raises(UnavailableError):
                running.result(timeout=60)
        assert _stats(sim)["requests"] == requests_before
    finally:
        stub.shutdown()
        stub.server_close()
