"""``DirectClient``: a workload routes itself to engines with discovery and the routing rules of ``@uis/routing``
(same decisions, checked by the shared vectors), skipping the gateway hop. On a connection error or a 503 it
refreshes discovery once and retries once on another replica; a 4xx is raised as is. Engines get no credential.
Like the gateway, it gives a request without a ``rid`` one (SGLang's request id) and remembers which replica holds
each rid in flight, so ``abort(rid)`` reaches that replica; the abort is sent again until the answer ends (an engine
drops one that arrives before it registered the rid). On each new snapshot it aborts its requests in flight that
started on a version more than their model's ``max_staleness`` behind the newest, as the gateway does with its own:
the caller gets the partial output (``finish_reason`` abort) and ``resume``s it."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx

from . import _calls
from ._inflight import InFlightRequests
from ._transport import Settings, run_sync
from .discovery import DiscoverySnapshot
from .errors import ConnectionFailedError, UisError, error_from_response
from .routing import ReplicaSelector, StalenessRule, request_keys, route
from .routing.resolve import ResolvedModel
from .routing.selector import Selection
from .rollout import Sample, min_version_headers
from .watcher import DiscoveryWatcher

_OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/completions"})


class DirectClient:
    """``client.direct("rollout")``; ``generate``, ``chat_completions``, ``completions`` and their streams."""

    def __init__(
        self,
        settings: Settings,
        role: str,
        *,
        watch: bool = True,
        failure_cooldown_s: float = 10.0,
        timeout: float = 600.0,
    ) -> None:
        self._settings = settings
        self._role = role
        self._http = httpx.Client(base_url=settings.base_url, timeout=settings.timeout)
        self._engines = httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0))
        #: rid -> the replica that holds it, while the request is in flight (and its abort's re-sends).
        self._in_flight = InFlightRequests(self._engines)
        self._staleness = StalenessRule()
        self._staleness_lock = threading.Lock()
        self._watcher = DiscoveryWatcher(settings, role, on_change=self._on_snapshot) if watch else None
        self._snapshot: DiscoverySnapshot | None = None
        self._suspects: dict[str, float] = {}
        self._cooldown = failure_cooldown_s
        self.selector = ReplicaSelector()

    def start(self) -> DiscoverySnapshot:
        if self._watcher is not None:
            return self._watcher.start()
        return self.refresh()

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        self._in_flight.close()
        self._http.close()
        self._engines.close()

    def __enter__(self) -> DirectClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def snapshot(self) -> DiscoverySnapshot:
        if self._watcher is not None:
            return self._watcher.snapshot
        if self._snapshot is None:
            return self.refresh()
        return self._snapshot

    def refresh(self) -> DiscoverySnapshot:
        snapshot = run_sync(self._http, self._settings, _calls.engines(self._role))
        self._snapshot = snapshot
        self._on_snapshot(snapshot)
        return snapshot

    @property
    def aborts_resending(self) -> int:
        """Aborts still being sent again (their requests' answers have not ended)."""
        return self._in_flight.resending

    def _on_snapshot(self, snapshot: DiscoverySnapshot) -> None:
        """Holds the requests in flight to their model's ``max_staleness`` (the gateway's rule)."""
        with self._staleness_lock:
            bounds = self._staleness.bounds(snapshot)
        for bound in bounds:
            self._in_flight.abort_stale(bound)

    def pick(
        self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None, exclude: set[str] | None = None
    ) -> tuple[ResolvedModel, Selection]:
        """The routing decision for a request, without sending it."""
        keys = request_keys(body, headers)
        failed = set(exclude or ())
        now = time.monotonic()
        suspects = {e for e, until in self._suspects.items() if until > now}
        routed = route(self.snapshot, keys, self.selector, failed | suspects)
        if isinstance(routed, UisError) and routed.code == "no_eligible_replica" and suspects and not failed:
            # Locally suspected replicas are a hint, not a rule: if they are all that is left, try them.
            routed = route(self.snapshot, keys, self.selector)
        if isinstance(routed, UisError):
            raise routed
        return routed

    def generate(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """SGLang ``/generate`` on a replica chosen by the rules (``model``/``route_key`` choose and are removed)."""
        return self._json("/generate", body, headers)

    def chat_completions(
        self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        return self._json("/v1/chat/completions", body, headers)

    def completions(self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self._json("/v1/completions", body, headers)

    def chat_completions_stream(
        self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """The chunks of a streamed chat completion (``stream: true`` is set). Never replayed once started."""
        return self._stream("/v1/chat/completions", {**body, "stream": True}, headers)

    def generate_stream(
        self, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> Iterator[dict[str, Any]]:
        return self._stream("/generate", {**body, "stream": True}, headers)

    def abort(self, rid: str) -> bool:
        """Aborts request ``rid`` at the replica this client sent it to (SGLang's ``abort_request``); its caller gets
        the partial output (``finish_reason`` abort). False when no request with that rid is in flight here. The
        abort is sent again, backing off (25 ms doubling to 400 ms, at most 40 times), until the answer ends: an
        engine drops an abort that arrives before it registered the rid."""
        return self._in_flight.abort(rid)

    def generate_sample(self, sample: Sample, *, min_weight_version: str | None = None, stream: bool = False) -> Sample:
        """One attempt of a rollout sample (the rest of its budget) on a replica at ``min_weight_version`` or newer,
        absorbed into ``sample``. Streamed, a cut stream leaves the tokens that arrived in the sample (then
        ``resume`` it). See ``uis_client.rollout``."""
        headers = min_version_headers(min_weight_version)
        if not stream:
            return sample.absorb(self.generate(sample.request(), headers))
        mark = sample.begin_stream()
        for chunk in self.generate_stream(sample.request(), headers):
            sample.absorb(chunk, stream_from=mark)
        return sample

    def resume(self, sample: Sample, *, min_weight_version: str | None = None, stream: bool = False) -> Sample:
        """Resumes an aborted or cut sample on a replica at ``min_weight_version`` or newer."""
        if not sample.interrupted:
            raise ValueError(f"sample {sample.rid} is not interrupted (finish_reason {sample.finish_reason})")
        return self.generate_sample(sample, min_weight_version=min_weight_version, stream=stream)

    def _engine_body(self, path: str, body: Mapping[str, Any], model: ResolvedModel) -> dict[str, Any]:
        rest = {k: v for k, v in body.items() if k != "route_key"}
        if path in _OPENAI_PATHS:
            return {**rest, "model": model.served_name}
        return {k: v for k, v in rest.items() if k != "model"}


    def _send(
        self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None, stream: bool
    ) -> tuple[httpx.Response, str | None, Callable[[], bool]]:
        """Sends to a selected replica; on a connection error or a 503, retries once on another (not an aborted
        request). Returns the response, the engine and the function that lets go of the request's rid."""
        # The rid is given after routing reads the body: a generated one is no affinity key.
        sent, rid = _with_rid(body)
        failed: set[str] = set()
        last: UisError | None = None
        for attempt in range(2):
            if attempt == 1 and self._watcher is None:
                try:
                    self.refresh()
                except UisError:
                    pass  # the last snapshot is still usable
            try:
                model, sel = self.pick(body, headers, failed)
            except UisError as e:
                if e.status != 503 or last is None:
                    raise
                break
            engine = sel.engine_id
            if engine is not None:
                self.selector.acquire(engine)
            engine_body = self._engine_body(path, sent, model)
            let_go = self._in_flight.hold(rid, sel.url, sel.model, sel.weight_version)
            request = self._engines.build_request("POST", sel.url + path, json=engine_body, headers=dict(headers or {}))
            try:
                response = self._engines.send(request, stream=stream)
            except httpx.TransportError as e:
                aborted = let_go()
                self._done(engine)
                if engine is not None:
                    failed.add(engine)
                    self._suspects[engine] = time.monotonic() + self._cooldown
                last = ConnectionFailedError(
                    "engine_unreachable", f"engine {engine or sel.url} at {sel.url}: {e}", status=503, path=sel.url
                )
                if aborted:
                    break
                continue
            if response.status_code < 400:
                return response, engine, let_go
            response.read()
            response.close()
            aborted = let_go()
            self._done(engine)
            error = error_from_response(response)
            if response.status_code != 503:
                raise error
            if engine is not None:
                failed.add(engine)
            last = error
            if aborted:
                break
        assert last is not None
        raise last

    def _done(self, engine: str | None) -> None:
        if engine is not None:
            self.selector.release(engine)

    def _json(self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None) -> dict[str, Any]:
        response, engine, let_go = self._send(path, body, headers, stream=False)
        try:
            data: dict[str, Any] = response.json()
            return data
        finally:
            let_go()
            self._done(engine)

    def _stream(
        self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None
    ) -> Iterator[dict[str, Any]]:
        response, engine, let_go = self._send(path, body, headers, stream=True)
        try:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                yield json.loads(data)
        finally:
            response.close()
            let_go()
            self._done(engine)


def _with_rid(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """Gives a single request without a rid one, the same for every attempt (a batch keeps the rids it has)."""
    rid = body.get("rid")
    if rid is None and not _is_batch(body):
        rid = f"direct-{uuid.uuid4().hex}"
        body = {**body, "rid": rid}
    return body, rid if isinstance(rid, str) else None


def _is_batch(body: Mapping[str, Any]) -> bool:
    """A ``/generate`` batch (a list of texts or of token id lists) keeps the rids it has, if any."""
    text, ids = body.get("text"), body.get("input_ids")
    return isinstance(text, list) or (isinstance(ids, list) and bool(ids) and isinstance(ids[0], list))
