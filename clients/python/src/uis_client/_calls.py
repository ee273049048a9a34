"""Every HTTP call of the client, described once as data (method, path, body, how to read the answer); the sync
and async clients only run them. The admin paths and bodies follow ``apps/gateway/README.md``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter

from .discovery import DiscoverySnapshot
from .models import Batch, BatchPage, Event, Health, Lease, ModelList, ModelReplicas, Operation

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    body: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)
    #: A mutation: audited and idempotent by operation id (the client always sends one, so retries are safe).
    mutation: bool = False
    #: Sent with the admin token (the command's permission is `admin`); else with the serving token when the client
    #: has one (reads: `serving` in the OpenAPI document's security), falling back to the admin token.
    admin: bool = True
    #: Read timeout in seconds for long calls (barrier waits, long polls); None: the client's default.
    timeout: float | None = None
    #: Retry 503s after Retry-After (False for barrier waits, where a 503 is an answer to report).
    retry: bool = True
    headers: dict[str, str] = field(default_factory=dict)


def _p(segment: str) -> str:
    return quote(segment, safe="")


def _op(kind: type[T]) -> Callable[[Any], Operation[T]]:
    adapter: TypeAdapter[Operation[T]] = TypeAdapter(Operation[kind])  # type: ignore[valid-type]
    return adapter.validate_python


def _any(body: Any) -> Operation[Any]:
    return Operation[Any].model_validate(body)


def _result(body: Any) -> Any:
    """The ``result`` of the admin envelope ``{ok, operation_id, result}`` that every admin answer has."""
    return body["result"] if isinstance(body, dict) and "ok" in body and "result" in body else body


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


# ---- serving and discovery ----------------------------------------------------------------------------------


def engines(role: str, model_name: str | None = None) -> Call[DiscoverySnapshot]:
    return Call(
        "GET",
        f"/{_p(role)}/engines",
        DiscoverySnapshot.model_validate,
        params=_clean({"model_name": model_name}),
        admin=False,
    )


def engines_wait(role: str, revision: int, epoch: str | None, timeout_s: float) -> Call[DiscoverySnapshot]:
    params = {"wait_revision": str(revision), "timeout_s": str(int(max(1, timeout_s)))}
    if epoch:
        params["registry_epoch"] = epoch
    return Call(
        "GET",
        f"/{_p(role)}/engines",
        DiscoverySnapshot.model_validate,
        params=params,
        admin=False,
        timeout=timeout_s + 10,
    )


def health(role: str) -> Call[Health]:
    return Call("GET", f"/{_p(role)}/health", Health.model_validate, admin=False)


def models(role: str) -> Call[ModelList]:
    return Call("GET", f"/{_p(role)}/v1/models", ModelList.model_validate, admin=False)


def serve(role: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Call[Any]:
    """A serving request through the role's gateway (``generate``, ``v1/chat/completions``, ``v1/completions``)."""
    return Call("POST", f"/{_p(role)}/{path}", lambda b: b, body, admin=False, headers=dict(headers or {}))


# ---- roles and models -----------------------------------------------------------------------------------------


def activate_role(role: str, tags: list[str] | None) -> Call[Operation[Any]]:
    return Call("POST", f"/admin/roles/{_p(role)}/activate", _any, _clean({"tags": tags}), mutation=True)


def drain_role(role: str, deadline_ms: int | None, policy: str | None) -> Call[Operation[Any]]:
    body = _clean({"deadline_ms": deadline_ms, "policy": policy})
    return Call("POST", f"/admin/roles/{_p(role)}/drain", _any, body, mutation=True)


def deactivate_role(role: str) -> Call[Operation[Any]]:
    return Call("POST", f"/admin/roles/{_p(role)}/deactivate", _any, {}, mutation=True)


def activate_model(role: str, model: str, tags: list[str] | None) -> Call[Operation[Any]]:
    path = f"/admin/roles/{_p(role)}/models/{_p(model)}/activate"
    return Call("POST", path, _any, _clean({"tags": tags}), mutation=True)


def drain_model(role: str, model: str, deadline_ms: int | None, policy: str | None) -> Call[Operation[Any]]:
    path = f"/admin/roles/{_p(role)}/models/{_p(model)}/drain"
    return Call("POST", path, _any, _clean({"deadline_ms": deadline_ms, "policy": policy}), mutation=True)


def deactivate_model(role: str, model: str) -> Call[Operation[Any]]:
    path = f"/admin/roles/{_p(role)}/models/{_p(model)}/deactivate"
    return Call("POST", path, _any, {}, mutation=True)


def update_weights(role: str, model: str, body: dict[str, Any]) -> Call[Operation[Any]]:
    path = f"/admin/roles/{_p(role)}/models/{_p(model)}/weights"
    return Call("POST", path, _any, _clean(body), mutation=True)


def model_replicas(role: str, model: str) -> Call[Operation[ModelReplicas]]:
    path = f"/admin/roles/{_p(role)}/models/{_p(model)}/replicas"
    return Call("GET", path, _op(ModelReplicas), admin=False)


def register_engine(role: str, model: str, url: str) -> Call[Operation[Any]]:
    path = f"/admin/roles/{_p(role)}/models/{_p(model)}/engines"
    return Call("POST", path, _any, {"url": url}, mutation=True)


def unregister_engine(role: str, engine_id: str) -> Call[Operation[Any]]:
    path = f"/admin/roles/{_p(role)}/engines/unregister"
    return Call("POST", path, _any, {"engine_id": engine_id}, mutation=True)


def restart_replica(role: str, engine_id: str) -> Call[Operation[Any]]:
    path = f"/admin/roles/{_p(role)}/engines/restart"
    return Call("POST", path, _any, {"engine_id": engine_id}, mutation=True)


def roles() -> Call[dict[str, Any]]:
    return Call("GET", "/admin/roles", lambda b: dict(_result(b)["roles"]), admin=False)


# ---- phases and barriers --------------------------------------------------------------------------------------

_leases: TypeAdapter[list[Lease]] = TypeAdapter(list[Lease])


def phases() -> Call[list[Lease]]:
    return Call("GET", "/admin/phases", lambda b: _leases.validate_python(_result(b)["leases"]), admin=False)


def advance_phase(group: str | None, to: str | None) -> Call[Operation[Any]]:
    return Call("POST", "/admin/phases/advance", _any, _clean({"group": group, "to": to}), mutation=True)


def resolve_lease(phase: str, group: str | None, note: str | None) -> Call[Operation[Any]]:
    body = _clean({"phase": phase, "group": group, "note": note})
    return Call("POST", "/admin/phases/resolve", _any, body, mutation=True)


def _lease_of(body: Any) -> Lease:
    return Lease.model_validate(_result(body))


def wait_barrier(phase: str, group: str | None, timeout_s: float) -> Call[Lease]:
    body = _clean({"phase": phase, "group": group, "timeout_s": timeout_s})
    return Call("POST", "/admin/barriers/wait", _lease_of, body, admin=False, timeout=timeout_s + 30, retry=False)


def release_barrier(phase: str, group: str | None) -> Call[Operation[Any]]:
    return Call("POST", "/admin/barriers/release", _any, _clean({"phase": phase, "group": group}), mutation=True)


# ---- deferred batches and events ------------------------------------------------------------------------------


def submit_batch(kind: str, samples: list[dict[str, Any]], model: str | None) -> Call[Operation[Batch]]:
    body = _clean({"kind": kind, "model": model, "samples": samples})
    return Call("POST", "/admin/batches", _op(Batch), body, mutation=True)


_batches: TypeAdapter[list[Batch]] = TypeAdapter(list[Batch])


def batches(state: str | None, role: str | None) -> Call[list[Batch]]:
    return Call(
        "GET",
        "/admin/batches",
        lambda b: _batches.validate_python(_result(b)["batches"]),
        params=_clean({"state": state, "role": role}),
        admin=False,
    )


def _batch_page(body: Any) -> BatchPage:
    return BatchPage.model_validate(_result(body))


def batch_page(batch_id: str, after: str | None, limit: int | None) -> Call[BatchPage]:
    params: dict[str, str] = {}
    if after is not None:
        params["after"] = after
    if limit is not None:
        params["limit"] = str(limit)
    return Call("GET", f"/admin/batches/{_p(batch_id)}", _batch_page, params=params, admin=False)


_events: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


def _event_list(body: Any) -> list[Event]:
    return _events.validate_python(_result(body)["events"])


def events(after: int | None, limit: int | None, kind: str | None, subject: str | None) -> Call[list[Event]]:
    params = {k: str(v) for k, v in _clean({"after": after, "limit": limit, "kind": kind, "subject": subject}).items()}
    return Call("GET", "/admin/events", _event_list, params=params, admin=False)
