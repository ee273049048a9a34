"""Every HTTP call of the client, described once as data (method, path, body, how to read the answer); the sync
and async clients only run them. The admin commands' calls are generated from the command table
(``_commands_gen.py``); this module holds what they are built with, and the serving and discovery calls."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from ._models_gen import AbortRequestResult
from .discovery import DiscoverySnapshot
from .models import Health, ModelList

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

#: Seconds a wait's call is given beyond the time the service may block it (a barrier's ``timeout_s``).
WAIT_MARGIN_S = 30


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


def q(segment: str) -> str:
    """A path segment, escaped (an engine id ``policy/1`` stays one segment)."""
    return quote(segment, safe="")


def given(**fields: Any) -> dict[str, Any]:
    """The optional fields the caller gave (None: left out, so the service's default holds)."""
    return {k: v for k, v in fields.items() if v is not None}


def query(fields: dict[str, Any]) -> dict[str, str]:
    """Query parameters as text (a boolean as ``true`` / ``false``)."""
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in fields.items()}


def _result(body: Any) -> Any:
    """The ``result`` of the envelope ``{ok, operation_id, result}`` every admin command answers."""
    if not isinstance(body, dict) or "result" not in body:
        raise ValueError(f"an admin answer is {{ok, operation_id, result}}, got {str(body)[:200]}")
    return body["result"]


def result_of(model: type[M]) -> Callable[[Any], M]:
    """Reads an admin answer's ``result`` as ``model``."""
    return lambda body: model.model_validate(_result(body))


def no_result(body: Any) -> None:
    """Checks an admin answer whose ``result`` is null."""
    if _result(body) is not None:
        raise ValueError(f"expected a null result, got {str(body)[:200]}")


# ---- serving and discovery ----------------------------------------------------------------------------------


def engines(role: str, model_name: str | None = None) -> Call[DiscoverySnapshot]:
    return Call(
        "GET",
        f"/{q(role)}/engines",
        DiscoverySnapshot.model_validate,
        params=given(model_name=model_name),
        admin=False,
    )


def engines_wait(role: str, revision: int, epoch: str | None, timeout_s: float) -> Call[DiscoverySnapshot]:
    params = {"wait_revision": str(revision), "timeout_s": str(int(max(1, timeout_s)))}
    if epoch:
        params["registry_epoch"] = epoch
    return Call(
        "GET",
        f"/{q(role)}/engines",
        DiscoverySnapshot.model_validate,
        params=params,
        admin=False,
        timeout=timeout_s + 10,
    )


def health(role: str) -> Call[Health]:
    return Call("GET", f"/{q(role)}/health", Health.model_validate, admin=False)


def models(role: str) -> Call[ModelList]:
    return Call("GET", f"/{q(role)}/v1/models", ModelList.model_validate, admin=False)


def serve(role: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Call[Any]:
    """A serving request through the role's gateway (``generate``, ``v1/chat/completions``, ``v1/completions``)."""
    return Call("POST", f"/{q(role)}/{path}", lambda b: b, body, admin=False, headers=dict(headers or {}))


def abort_request(role: str, body: dict[str, Any]) -> Call[AbortRequestResult]:
    """SGLang's ``abort_request`` on the role's gateway (``{rid}`` or ``{abort_all, model?}``), serving token."""
    return Call("POST", f"/{q(role)}/abort_request", AbortRequestResult.model_validate, body, admin=False)
