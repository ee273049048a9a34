"""The discovery snapshot (``GET /<role>/engines``, schema 2) as pydantic models, and its validation with the paths
``@uis/spec``'s ``DiscoverySnapshotSchema`` reports (``discovery.models.<m>.engines[0].state``)."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import UnavailableError, UisError

ReplicaState = Literal["starting", "ready", "draining", "sleeping", "onloading", "dead"]
ReplicaPolicy = Literal["round_robin", "least_outstanding", "affinity", "cache_aware"]
CircuitState = Literal["closed", "open", "half_open"]


class DiscoveryEngine(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    engine_id: str = Field(min_length=1)
    base_url: str | None
    state: ReplicaState
    direct_eligible: bool
    weight_version: str | None = None
    group: int | None = Field(default=None, ge=0)
    worker_type: Literal["regular", "prefill", "decode"] | None = None
    generation: int | None = Field(default=None, ge=0)
    # The SGLang release the engine reports (its server info version), once it was healthy.
    sglang_version: str | None = None
    # Its update failed in a weight switch: never routed to until an operator restarts it.
    quarantined: bool | None = None
    # The gateway's circuit breaker of this replica (absent for a model an SGLang router serves).
    circuit: CircuitState | None = None


class DiscoveryModel(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    state: ReplicaState
    router_url: str | None
    engines: list[DiscoveryEngine]
    weight_version: str | None = None
    # A replica more versions than this behind the newest of the model is not eligible (absent: no bound).
    max_staleness: int | None = Field(default=None, ge=0)
    served_model_name: str | None = None
    held: bool | None = None
    # Relax's readers: the model takes requests now; how they reach it; where its weights come from.
    admission: bool | None = None
    route_mode: Literal["direct", "sglang_router"] | None = None
    weight_source: Literal["static", "disk", "dcs", "tensor"] | None = None


class DiscoveryRouting(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    default_model: str | None
    route_keys: dict[str, str]
    # Relax's name for the route keys (configured keys, then every model under its own name).
    route_key_to_model: dict[str, str] | None = None
    aliases: dict[str, str]
    policy: ReplicaPolicy
    model_policies: dict[str, ReplicaPolicy]


class DiscoverySnapshot(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    schema_version: Literal[2] | None = None
    role: Literal["rollout", "genrm", "teacher"]
    topology_revision: int = Field(ge=0)
    registry_epoch: str | None = Field(default=None, min_length=1)
    # ``registry_epoch`` under the name Relax's readers require.
    manager_epoch: str | None = Field(default=None, min_length=1)
    phase: str | None
    models: dict[str, DiscoveryModel]
    routing: DiscoveryRouting | None = None


def format_path(parts: tuple[int | str, ...] | list[int | str], root: str) -> str:
    """``a.b[0].c`` under ``root``, as ``@uis/spec``'s ``formatPath``."""
    out = root
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _url_problem(value: str) -> str | None:
    try:
        url = urlsplit(value)
    except ValueError:
        return f"not a URL: {value!r}"
    if url.scheme not in ("http", "https"):
        return f"URL must be http or https, got {url.scheme}:"
    if not url.hostname:
        return "URL must have a host"
    if url.username or url.password:
        return "URL must not carry credentials"
    if "?" in value:
        return "URL must not have a query"
    if "#" in value:
        return "URL must not have a fragment"
    return None


def _semantic_issues(snapshot: DiscoverySnapshot) -> list[tuple[list[int | str], str]]:
    issues: list[tuple[list[int | str], str]] = []
    for name, model in snapshot.models.items():
        if model.router_url is not None and (problem := _url_problem(model.router_url)):
            issues.append((["models", name, "router_url"], problem))
        for i, engine in enumerate(model.engines):
            at: list[int | str] = ["models", name, "engines", i]
            if engine.base_url is not None and (problem := _url_problem(engine.base_url)):
                issues.append(([*at, "base_url"], problem))
            if engine.direct_eligible and engine.state != "ready":
                issues.append(
                    (
                        [*at, "direct_eligible"],
                        f"direct_eligible can only be true for a ready replica (state is {engine.state})",
                    )
                )
            if engine.direct_eligible and engine.base_url is None:
                issues.append(([*at, "direct_eligible"], "direct_eligible needs a base_url"))
    return issues


def check_snapshot(raw: object) -> DiscoverySnapshot | UisError:
    """A valid snapshot, or a 503 ``discovery_malformed`` naming the first bad path (the client did nothing
    wrong: the service cannot be routed to right now)."""
    if isinstance(raw, DiscoverySnapshot):
        return raw
    if not isinstance(raw, dict):
        kind = "null" if raw is None else type(raw).__name__
        return UnavailableError(
            "discovery_malformed",
            f"discovery snapshot is not an object (got {kind})",
            status=503,
            path="discovery",
        )
    try:
        snapshot = DiscoverySnapshot.model_validate(raw)
    except ValidationError as e:
        found = [(list(err["loc"]), err["msg"]) for err in e.errors()]
    else:
        found = _semantic_issues(snapshot)
        if not found:
            return snapshot
    issues = [{"path": format_path(loc, "discovery"), "message": msg} for loc, msg in found]
    return UnavailableError(
        "discovery_malformed",
        "discovery snapshot is malformed: " + "; ".join(f"{i['path']}: {i['message']}" for i in issues),
        status=503,
        path=issues[0]["path"],
        details=issues,
    )
