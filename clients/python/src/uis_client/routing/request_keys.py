"""What routing reads from one request, as ``packages/routing/src/request-keys.ts``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ROUTE_KEY_HEADER = "x-route-key"
DEFAULT_AFFINITY_HEADER = "x-smg-routing-key"
MIN_WEIGHT_VERSION_HEADER = "x-min-weight-version"


@dataclass(frozen=True)
class RequestKeys:
    """Two keys, two ideas (``packages/routing/README.md``): the route key picks the model, the affinity key pins
    a replica."""

    model: str | None = None
    # Picks the model through routing.route_keys: the body's ``route_key`` (Relax), or the X-Route-Key header.
    route_key: str | None = None
    # Pins a replica whatever the model's policy: the affinity header (SGLang's X-SMG-Routing-Key by default).
    affinity_key: str | None = None
    # The body's session_id, session_params.id or string rid: pins a replica under the affinity policy only.
    session_key: str | None = None
    min_weight_version: str | None = None


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def request_keys(
    body: Any,
    headers: Mapping[str, str] | None = None,
    affinity_header: str = DEFAULT_AFFINITY_HEADER,
) -> RequestKeys:
    """Model and route key (body ``route_key``, or the ``X-Route-Key`` header), the affinity key (the affinity
    header), the session key (the body's ``session_id``, ``session_params.id`` or string ``rid``) and
    ``X-Min-Weight-Version``. Never raises."""
    b: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    session = b.get("session_params")
    session_id = _str(session.get("id")) if isinstance(session, Mapping) else None
    return RequestKeys(
        model=_str(b.get("model")),
        route_key=_str(b.get("route_key")) or _str(_header(headers, ROUTE_KEY_HEADER)),
        affinity_key=_str(_header(headers, affinity_header.lower())),
        session_key=_str(b.get("session_id")) or session_id or _str(b.get("rid")),
        min_weight_version=_str(_header(headers, MIN_WEIGHT_VERSION_HEADER)),
    )
