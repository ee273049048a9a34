"""Model resolution of ``packages/routing/src/resolve-model.ts``: explicit model (id, alias, served name) ->
route_key (a configured one, else a model's own name) -> default model -> the only model -> 400
``model_required``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..discovery import DiscoveryModel, DiscoverySnapshot, ReplicaPolicy, ReplicaState, check_snapshot
from ..errors import BadRequestError, UisError, UnavailableError
from .states import retry_guidance

Via = Literal["model", "alias", "served_name", "route_key", "default", "only_model"]


@dataclass(frozen=True)
class ResolvedModel:
    role: str
    name: str
    served_name: str
    state: ReplicaState
    entry: DiscoveryModel
    policy: ReplicaPolicy
    via: Via
    registry_epoch: str
    topology_revision: int


def _known(snapshot: DiscoverySnapshot) -> dict[str, Any]:
    r = snapshot.routing
    return {
        "models": list(snapshot.models),
        "aliases": list(r.aliases) if r else [],
        "route_keys": list(r.route_keys) if r else [],
        "default_model": r.default_model if r else None,
    }


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "(none)"


def _inconsistent(snapshot: DiscoverySnapshot, path: str, what: str) -> UisError:
    return UnavailableError(
        "routing_inconsistent",
        f"{what} is not in discovery (models: {_names(list(snapshot.models))})",
        status=503,
        path=path,
        details=_known(snapshot),
    )


def policy_for(snapshot: DiscoverySnapshot, model: str) -> ReplicaPolicy:
    r = snapshot.routing
    if r is None:
        return "round_robin"
    return r.model_policies.get(model, r.policy)


def _pick_name(
    snapshot: DiscoverySnapshot, model: str | None, route_key: str | None
) -> tuple[str, Via] | UisError:
    models = snapshot.models
    rules = snapshot.routing
    if model:
        if model in models:
            return model, "model"
        if rules is not None and model in rules.aliases:
            target = rules.aliases[model]
            if target not in models:
                return _inconsistent(snapshot, "body.model", f'model "{target}" (alias "{model}")')
            return target, "alias"
        served = [m for m, e in models.items() if e.served_model_name == model]
        if len(served) != 1:
            k = _known(snapshot)
            return BadRequestError(
                "model_not_served",
                f'unknown model "{model}"; models: {_names(k["models"])}; aliases: {_names(k["aliases"])}',
                status=400,
                path="body.model",
                details={"requested": model, **k},
            )
        return served[0], "served_name"
    if route_key:
        # A configured route key first; else a key naming a model selects it (Relax selects a GenRM instance so).
        keyed = rules.route_keys.get(route_key) if rules is not None else None
        if keyed is None and route_key in models:
            keyed = route_key
        if keyed is None:
            k = _known(snapshot)
            return BadRequestError(
                "unknown_route_key",
                f'unknown route_key "{route_key}"; route keys: {_names(k["route_keys"])} (a default model is '
                'never used for an unknown route_key; send "model" to choose one)',
                status=400,
                path="route_key",
                details={"requested": route_key, **k},
            )
        if keyed not in models:
            return _inconsistent(snapshot, "route_key", f'model "{keyed}" (route_key "{route_key}")')
        return keyed, "route_key"
    if rules is not None and rules.default_model:
        if rules.default_model not in models:
            return _inconsistent(
                snapshot, "routing.default_model", f'default model "{rules.default_model}"'
            )
        return rules.default_model, "default"
    if len(models) != 1:
        k = _known(snapshot)
        return BadRequestError(
            "model_required",
            f'no model asked and no default model configured; send "model" (one of: {_names(k["models"])}) '
            f"or a route_key ({_names(k['route_keys'])})",
            status=400,
            path="body.model",
            details=k,
        )
    return next(iter(models)), "only_model"


def resolve_model(
    raw_snapshot: object, model: str | None = None, route_key: str | None = None
) -> ResolvedModel | UisError:
    """The model a request goes to, or the error the gateway would answer (returned, not raised)."""
    snapshot = check_snapshot(raw_snapshot)
    if isinstance(snapshot, UisError):
        return snapshot
    picked = _pick_name(snapshot, model, route_key)
    if isinstance(picked, UisError):
        return picked
    name, via = picked
    entry = snapshot.models[name]
    if entry.state != "ready":
        retry_after, reason = retry_guidance(entry.state, entry.held is True)
        message = reason.replace("model ", f'model "{name}" ', 1) if reason.startswith("model ") else reason
        return UnavailableError(
            "model_not_ready",
            f"{message}; retry after {retry_after}s",
            status=503,
            path="body.model",
            details={
                "model": name,
                "state": entry.state,
                **({"held": True} if entry.held else {}),
                "retry_after_s": retry_after,
                "reason": reason,
            },
            retry_after=retry_after,
        )
    return ResolvedModel(
        role=snapshot.role,
        name=name,
        served_name=entry.served_model_name or name,
        state=entry.state,
        entry=entry,
        policy=policy_for(snapshot, name),
        via=via,
        registry_epoch=snapshot.registry_epoch or "",
        topology_revision=snapshot.topology_revision,
    )
