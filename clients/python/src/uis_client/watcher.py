"""Discovery watcher: ``GET /<role>/engines?wait_revision=N&registry_epoch=E&timeout_s=T`` long-polls, so a new
topology arrives as soon as it is published. A snapshot is adopted when it is newer: another registry epoch
(revisions restart with a new registry), or the same epoch with a higher revision."""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable

import httpx

from . import _calls
from ._transport import Settings, run_async, run_sync
from .discovery import DiscoverySnapshot
from .errors import UisError


def is_newer(snapshot: DiscoverySnapshot, current: DiscoverySnapshot | None) -> bool:
    if current is None:
        return True
    if snapshot.registry_epoch != current.registry_epoch:
        return True
    return snapshot.topology_revision > current.topology_revision


class DiscoveryWatcher:
    """Keeps the newest snapshot of a role in a background thread and calls ``on_change`` with each new one.

    ``with client.watch("rollout") as w: w.snapshot`` or ``w.wait_for(lambda s: s.phase == "train")``."""

    def __init__(
        self,
        settings: Settings,
        role: str,
        *,
        poll_timeout_s: float = 30.0,
        on_change: Callable[[DiscoverySnapshot], None] | None = None,
    ) -> None:
        self._settings = settings
        self._role = role
        self._poll_timeout_s = poll_timeout_s
        self._on_change = on_change
        self._http = httpx.Client(base_url=settings.base_url, timeout=settings.timeout)
        self._cond = threading.Condition()
        self._snapshot: DiscoverySnapshot | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        #: Why the last poll failed (discovery down or malformed); the last good snapshot stays in use.
        self.last_error: Exception | None = None

    @property
    def snapshot(self) -> DiscoverySnapshot:
        with self._cond:
            if self._snapshot is None:
                raise UisError("discovery_not_loaded", "no discovery snapshot yet: call start() first", status=0)
            return self._snapshot

    def start(self) -> DiscoverySnapshot:
        """Loads the first snapshot, then watches in a daemon thread."""
        first = run_sync(self._http, self._settings, _calls.engines(self._role))
        self._adopt(first)
        self._thread = threading.Thread(target=self._run, name=f"uis-watch-{self._role}", daemon=True)
        self._thread.start()
        return first

    def stop(self) -> None:
        self._stopped.set()
        self._http.close()  # ends a long poll in flight
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def __enter__(self) -> DiscoveryWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(
        self, predicate: Callable[[DiscoverySnapshot], bool], timeout: float | None = None
    ) -> DiscoverySnapshot:
        """Blocks until a snapshot satisfies ``predicate`` (checked on every new snapshot; no polling)."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self._snapshot is not None and predicate(self._snapshot), timeout=timeout
            )
            if not ok or self._snapshot is None:
                raise UisError("watch_timeout", f"no matching {self._role} snapshot within {timeout}s", status=0)
            return self._snapshot

    def _adopt(self, snapshot: DiscoverySnapshot) -> None:
        with self._cond:
            if not is_newer(snapshot, self._snapshot):
                return
            self._snapshot = snapshot
            self._cond.notify_all()
        if self._on_change is not None:
            self._on_change(snapshot)

    def _run(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            current = self._snapshot
            try:
                call = _calls.engines_wait(
                    self._role,
                    current.topology_revision if current else -1,
                    current.registry_epoch if current else None,
                    self._poll_timeout_s,
                )
                self._adopt(run_sync(self._http, self._settings, call))
                failures = 0
            except Exception as e:  # noqa: BLE001 - any failure keeps the last good snapshot
                if self._stopped.is_set():
                    return
                self.last_error = e
                failures += 1
                self._stopped.wait(min(0.5 * 2 ** min(failures - 1, 6), 30.0))


async def watch_async(
    http: httpx.AsyncClient, settings: Settings, role: str, poll_timeout_s: float = 30.0
) -> AsyncGenerator[DiscoverySnapshot, None]:
    """Yields the current snapshot, then every newer one as the service publishes it."""
    current = await run_async(http, settings, _calls.engines(role))
    yield current
    while True:
        call = _calls.engines_wait(role, current.topology_revision, current.registry_epoch, poll_timeout_s)
        snapshot = await run_async(http, settings, call)
        if is_newer(snapshot, current):
            current = snapshot
            yield current
