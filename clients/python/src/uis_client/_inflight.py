"""The direct client's requests in flight by rid, where each went, and their aborts (``DirectRequests`` of
``@uis/routing``): an abort is sent again, backing off, until the request's answer ends, since SGLang drops an abort
of a rid its tokenizer manager has not registered yet (0.5.2-0.5.23: ``rid not in self.rid_to_state``), which a
request sent a moment before may not be; and a request that started on a version more than its model's
``max_staleness`` behind the newest is aborted (``StalenessRule``, the gateway's rule for the requests it holds)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from .errors import error_from_response
from .routing import StalenessBound

#: The first re-send after this long, then twice as long each time up to RESEND_MAX_S, at most RESEND_LIMIT times
#: (the TypeScript client's and the gateway's timing).
RESEND_FIRST_S = 0.025
RESEND_MAX_S = 0.4
RESEND_LIMIT = 40


@dataclass
class _InFlight:
    url: str
    model: str | None
    weight_version: str | None
    #: Set once aborted (by its caller or for staleness); its ``stop`` ends the re-sends.
    aborting: bool = False
    stop: threading.Event = field(default_factory=threading.Event)


class InFlightRequests:
    """``hold`` when a request is sent, the returned function when its answer ends; ``abort`` and ``abort_stale``
    in between. Thread-safe: rollout threads send, the discovery watcher's thread applies staleness."""

    def __init__(self, engines: httpx.Client) -> None:
        self._engines = engines
        self._at: dict[str, _InFlight] = {}
        self._lock = threading.Lock()

    def hold(self, rid: str | None, url: str, model: str | None, weight_version: str | None) -> Callable[[], bool]:
        """Records that ``url`` holds ``rid``; the returned function lets go (the attempt's answer ended or failed)
        and says whether the attempt was aborted meanwhile (then it is not retried elsewhere)."""
        if rid is None:
            return lambda: False
        entry = _InFlight(url, model, weight_version)
        with self._lock:
            self._at[rid] = entry

        def let_go() -> bool:
            entry.stop.set()
            with self._lock:
                if self._at.get(rid) is entry:
                    del self._at[rid]
            return entry.aborting

        return let_go

    @property
    def resending(self) -> int:
        """Aborts still being sent again (their answers have not ended)."""
        with self._lock:
            return sum(1 for e in self._at.values() if e.aborting and not e.stop.is_set())

    def abort(self, rid: str) -> bool:
        """``abort_request {rid}`` where the request went, then again until its answer ends; False when no request
        with that rid is in flight here."""
        with self._lock:
            entry = self._at.get(rid)
            start = entry is not None and not entry.aborting
            if entry is not None:
                entry.aborting = True
        if entry is None:
            return False
        if start:
            self._keep_aborting(rid, entry, send_now=False)
        answer = self._engines.post(f"{entry.url}/abort_request", json={"rid": rid})
        if answer.status_code >= 400:
            raise error_from_response(answer)
        return True

    def abort_stale(self, bound: StalenessBound) -> list[str]:
        """Aborts, once each, the requests of the bound's model that started on a version past it; their callers
        get the partial output (``finish_reason`` abort) and resume them. Sent from a thread, not awaited."""
        stale: list[tuple[str, _InFlight]] = []
        with self._lock:
            for rid, entry in self._at.items():
                if entry.model == bound.model and not entry.aborting and bound.is_stale(entry.weight_version):
                    entry.aborting = True
                    stale.append((rid, entry))
        for rid, entry in stale:
            self._keep_aborting(rid, entry, send_now=True)
        return [rid for rid, _ in stale]

    def close(self) -> None:
        """Stops every re-send (the client closes)."""
        with self._lock:
            for entry in self._at.values():
                entry.stop.set()

    def _keep_aborting(self, rid: str, entry: _InFlight, *, send_now: bool) -> None:
        """Sends the abort again, backing off, until this attempt's answer ends (``stop``), at most RESEND_LIMIT
        times. An engine answers an abort of a rid it no longer has with 200, nothing done."""

        def run() -> None:
            if send_now:
                self._send(entry.url, rid)
            wait = RESEND_FIRST_S
            for _ in range(RESEND_LIMIT):
                if entry.stop.wait(wait):
                    return
                self._send(entry.url, rid)
                wait = min(2 * wait, RESEND_MAX_S)
            entry.stop.set()

        threading.Thread(target=run, name=f"uis-abort-{rid}", daemon=True).start()

    def _send(self, url: str, rid: str) -> None:
        try:
            self._engines.post(f"{url}/abort_request", json={"rid": rid}).close()
        except httpx.HTTPError:
            pass  # an engine that does not answer now is asked again at the next turn
