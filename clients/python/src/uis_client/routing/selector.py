"""Replica selection of ``packages/routing/src/replica-selector.ts``: candidates are ready, direct_eligible regular
replicas with a URL, in discovery order; a router-mode model answers its router. Policies: round robin (a counter
per model, reset when ``registry_epoch`` changes), least outstanding (ties from the round-robin cursor), affinity
(Relax's SHA-256 rendezvous; no key: round robin); a request keyed by the routing-key header takes the affinity rule
whatever the policy. ``cache_aware`` lives in the gateway (its prefix trees see every client's
requests), so it is refused here with ``policy_needs_gateway``."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Literal

from ..discovery import DiscoveryEngine, DiscoveryModel, ReplicaPolicy
from ..errors import UisError, UnavailableError
from .affinity import relax_affinity_pick
from .resolve import ResolvedModel
from .weight_version import compare_weight_versions, meets_min_weight_version, versions_behind

Reason = Literal["router", "round_robin", "least_outstanding", "affinity"]
_RR_WRAP = 0x40000000


@dataclass(frozen=True)
class Candidate:
    engine_id: str
    url: str
    weight_version: str | None


@dataclass(frozen=True)
class Selection:
    model: str
    url: str
    engine_id: str | None
    via_router: bool
    policy: ReplicaPolicy
    reason: Reason
    #: The chosen replica's weight version in the snapshot (None: router mode, or none reported).
    weight_version: str | None = None


@dataclass
class _ModelState:
    epoch: str
    rr: int = 0
    entry: DiscoveryModel | None = None
    candidates: list[Candidate] = field(default_factory=list)


def is_eligible(engine: DiscoveryEngine, model_version: str | None = None) -> bool:
    """Ready, direct_eligible, with a URL, a regular worker, not quarantined (its update failed in a weight switch)
    and not below its model's weight version (a snapshot a switch left behind never sends work to a replica the
    model moved past)."""
    return (
        engine.state == "ready"
        and engine.direct_eligible
        and engine.base_url is not None
        and engine.worker_type in (None, "regular")
        and engine.quarantined is not True
        and (model_version is None or meets_min_weight_version(engine.weight_version, model_version))
    )


def _within_staleness(engines: list[DiscoveryEngine], entry: DiscoveryModel, bound: int) -> list[DiscoveryEngine]:
    """``withinStaleness``: at most ``bound`` versions behind the newest of the engines and the model's own."""
    known = [e.weight_version for e in engines if e.weight_version is not None]
    if entry.weight_version is not None:
        known.append(entry.weight_version)
    if not known:
        return []
    newest = known[0]
    for v in known[1:]:
        if compare_weight_versions(v, newest) > 0:
            newest = v
    return [
        e
        for e in engines
        if e.weight_version is not None and versions_behind(e.weight_version, newest, known) <= bound
    ]


def _candidates(entry: DiscoveryModel) -> list[Candidate]:
    eligible = [e for e in entry.engines if is_eligible(e, entry.weight_version) and e.base_url is not None]
    if entry.max_staleness is not None:
        eligible = _within_staleness(eligible, entry, entry.max_staleness)
    return [Candidate(e.engine_id, e.base_url, e.weight_version) for e in eligible if e.base_url is not None]


def _no_eligible(name: str, entry: DiscoveryModel) -> UisError:
    states = [
        f"{e.engine_id}={e.state}{'' if e.direct_eligible else ' (not direct_eligible)'}" for e in entry.engines
    ]
    listed = ", ".join(states) if states else "no replicas"
    return UnavailableError(
        "no_eligible_replica",
        f'model "{name}" has no ready, direct_eligible replica with a URL ({listed})',
        status=503,
        path="body.model",
        details={"model": name, "engines": states, "retry_after_s": 1},
        retry_after=1,
    )


def _no_version(name: str, minimum: str, versions: list[str], router: bool) -> UisError:
    what = "(router mode) has no ready worker" if router else "has no eligible replica"
    served = ", ".join(versions) or ("(no ready worker)" if router else "")
    return UnavailableError(
        "no_replica_at_version",
        f'model "{name}" {what} at weight version >= {minimum}; versions served: {served}',
        status=503,
        path="headers.x-min-weight-version",
        details={"model": name, "min_weight_version": minimum, "versions": versions, "retry_after_s": 1},
        retry_after=1,
    )


class ReplicaSelector:
    """One per role, as in the gateway: deterministic given its inputs (no clock, no randomness)."""

    def __init__(self, in_flight: Callable[[str], int] | None = None) -> None:
        self._models: dict[str, _ModelState] = {}
        self._counts: dict[str, int] = {}
        self._in_flight_fn = in_flight

    def acquire(self, engine_id: str) -> None:
        self._counts[engine_id] = self._counts.get(engine_id, 0) + 1

    def release(self, engine_id: str) -> None:
        if self._counts.get(engine_id, 0) > 0:
            self._counts[engine_id] -= 1

    def in_flight(self, engine_id: str) -> int:
        return self._in_flight_fn(engine_id) if self._in_flight_fn else self._counts.get(engine_id, 0)

    def select(
        self,
        model: ResolvedModel,
        affinity_key: str | None = None,
        min_weight_version: str | None = None,
        exclude: Collection[str] = (),
        session_key: str | None = None,
    ) -> Selection | UisError:
        entry = model.entry
        if entry.router_url is not None:
            return self._router(model, entry.router_url, min_weight_version)
        # The affinity key keys every policy (Relax's rule); the session key only the affinity policy.
        key = affinity_key or (session_key if model.policy == "affinity" else None)
        if model.policy == "cache_aware" and not key:
            return UisError(
                "policy_needs_gateway",
                f'model "{model.name}" routes cache_aware: send it through the gateway, whose prefix trees see '
                "every client's requests",
                status=0,
                path="body.model",
                details={"model": model.name, "policy": model.policy},
            )
        state = self._state_for(model)
        slots = self._eligible(model, state, min_weight_version, exclude)
        if isinstance(slots, UisError):
            return slots
        if key:
            ids = [cand.engine_id for cand in slots]
            return self._pick(model, slots[relax_affinity_pick(model.role, model.name, key, ids)], "affinity")
        if model.policy == "least_outstanding":
            return self._pick(model, self._least_loaded(state, slots), "least_outstanding")
        return self._pick(model, slots[self._next_rr(state) % len(slots)], "round_robin")

    def _router(self, model: ResolvedModel, url: str, minimum: str | None) -> Selection | UisError:
        if minimum:
            ready = [e for e in model.entry.engines if e.state == "ready"]
            if not any(meets_min_weight_version(e.weight_version, minimum) for e in ready):
                versions = list(dict.fromkeys(e.weight_version or "(none)" for e in ready))
                return _no_version(model.name, minimum, versions, router=True)
        return Selection(model.name, url, None, True, model.policy, "router")

    def _state_for(self, model: ResolvedModel) -> _ModelState:
        state = self._models.get(model.name)
        if state is None or state.epoch != model.registry_epoch:
            state = _ModelState(epoch=model.registry_epoch)
            self._models[model.name] = state
        if state.entry is not model.entry:
            # Candidates before the entry: a thread that sees the new entry must see its candidates (a DirectClient
            # shared by rollout threads found none, a spurious no_eligible_replica, when the order was reversed).
            state.candidates = _candidates(model.entry)
            state.entry = model.entry
        return state

    def _eligible(
        self, model: ResolvedModel, state: _ModelState, minimum: str | None, exclude: Collection[str]
    ) -> list[Candidate] | UisError:
        every = state.candidates
        if not every:
            return _no_eligible(model.name, model.entry)
        slots = every
        if minimum:
            slots = [c for c in every if meets_min_weight_version(c.weight_version, minimum)]
            if not slots:
                reported = [c.weight_version for c in every if c.weight_version is not None]
                versions = sorted(set(reported), key=_version_key)
                if len(reported) < len(every):
                    versions.append("(none)")
                return _no_version(model.name, minimum, versions, router=False)
        if exclude:
            slots = [c for c in slots if c.engine_id not in exclude]
            if not slots:
                return UnavailableError(
                    "no_eligible_replica",
                    f'model "{model.name}": every eligible replica was excluded after failing '
                    f"({', '.join(exclude)})",
                    status=503,
                    path="body.model",
                    details={"model": model.name, "excluded": list(exclude), "retry_after_s": 1},
                    retry_after=1,
                )
        return slots

    def _next_rr(self, state: _ModelState) -> int:
        value = state.rr
        state.rr = (value + 1) % _RR_WRAP
        return value

    def _least_loaded(self, state: _ModelState, slots: list[Candidate]) -> Candidate:
        n = len(slots)
        start = self._next_rr(state) % n
        best = slots[start]
        best_load = self.in_flight(best.engine_id)
        i = 1
        while i < n and best_load > 0:
            cand = slots[(start + i) % n]
            load = self.in_flight(cand.engine_id)
            if load < best_load:
                best, best_load = cand, load
            i += 1
        return best

    def _pick(self, model: ResolvedModel, cand: Candidate, reason: Reason) -> Selection:
        return Selection(model.name, cand.url, cand.engine_id, False, model.policy, reason, cand.weight_version)


class _VersionKey:
    __slots__ = ("v",)

    def __init__(self, v: str) -> None:
        self.v = v

    def __lt__(self, other: _VersionKey) -> bool:
        return compare_weight_versions(self.v, other.v) < 0


def _version_key(v: str) -> _VersionKey:
    return _VersionKey(v)
