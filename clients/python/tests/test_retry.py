"""Retry-After is honoured: a real HTTP server on 127.0.0.1 answers 503 with Retry-After, then 200."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from uis_client import UisClient, UnavailableError


_TRANSITION = {"group": "actor", "from": "rollout", "to": "train", "path": ["train"], "duration_ms": 5, "steps": []}


class _Flaky(BaseHTTPRequestHandler):
    unavailable = 0
    seen: list[tuple[float, str | None]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).seen.append((time.monotonic(), self.headers.get("idempotency-key")))
        if len(type(self).seen) <= type(self).unavailable:
            body = {"error": {"code": "model_not_ready", "message": "onloading", "details": {"retry_after_s": 1}}}
            self._answer(503, body, {"retry-after": "1"})
        else:
            self._answer(200, {"ok": True, "operation_id": "x", "result": _TRANSITION}, {})

    def _answer(self, status: int, body: object, headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for k, v in {"content-type": "application/json", "content-length": str(len(data)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def flaky() -> Iterator[str]:
    _Flaky.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_503_is_retried_after_retry_after_with_the_same_operation_id(flaky: str) -> None:
    _Flaky.unavailable = 2
    with UisClient(flaky, admin_token="t") as c:
        moved = c.advance_phase(group="actor")
    assert (moved.from_, moved.to, moved.path) == ("rollout", "train", ["train"])
    times = [t for t, _ in _Flaky.seen]
    assert len(times) == 3
    assert all(later - earlier >= 0.95 for earlier, later in zip(times, times[1:]))
    keys = {k for _, k in _Flaky.seen}
    assert len(keys) == 1 and None not in keys  # one operation: the retries cannot run it twice


def test_retries_stop_at_the_wait_budget(flaky: str) -> None:
    _Flaky.unavailable = 10
    with UisClient(flaky, admin_token="t", max_retry_wait=1.5) as c:
        with pytest.raises(UnavailableError) as info:
            c.advance_phase(group="actor")
    assert info.value.retry_after == 1
    assert len(_Flaky.seen) == 2  # the first try, then one retry after 1 s; a second would pass the 1.5 s budget
