"""The in-flight ``max_staleness`` rule of ``packages/routing/src/staleness.ts`` (``StalenessRule``): the gateway
applies it to the requests it holds, the direct clients to the requests they send to engines themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..discovery import DiscoverySnapshot
from .weight_version import compare_weight_versions, versions_behind

#: Versions remembered per model (to count versions that are not plain numbers).
_KEPT_VERSIONS = 256


@dataclass(frozen=True)
class StalenessBound:
    """A model's ``max_staleness`` on one topology: a request in flight that started on a version ``behind`` more
    than ``max_staleness`` versions of ``newest`` is aborted (with its partial output) and resumed by its caller."""

    model: str
    max_staleness: int
    newest: str
    behind: Callable[[str], int | float]

    def is_stale(self, version: str | None) -> bool:
        """A request without a version never is: nothing says how old it is."""
        return version is not None and self.behind(version) > self.max_staleness


class StalenessRule:
    """Per published topology, the bound of each model with a ``max_staleness`` and a known version. Versions are
    remembered across topologies, so versions that are not plain numbers count by the distinct versions the model
    went through."""

    def __init__(self) -> None:
        self._seen: dict[str, list[str]] = {}

    def bounds(self, snapshot: DiscoverySnapshot) -> list[StalenessBound]:
        out: list[StalenessBound] = []
        for name, m in snapshot.models.items():
            versions = [v for v in [m.weight_version, *(e.weight_version for e in m.engines)] if v is not None]
            known = self._remember(name, versions)
            if m.max_staleness is None or not versions:
                continue
            newest = versions[0]
            for v in versions[1:]:
                if compare_weight_versions(v, newest) > 0:
                    newest = v
            out.append(StalenessBound(name, m.max_staleness, newest, _behind(newest, list(known))))
        return out

    def _remember(self, model: str, versions: list[str]) -> list[str]:
        seen = self._seen.setdefault(model, [])
        for v in versions:
            if v not in seen:
                seen.append(v)
        del seen[: max(0, len(seen) - _KEPT_VERSIONS)]
        return seen


def _behind(newest: str, known: list[str]) -> Callable[[str], int | float]:
    return lambda version: versions_behind(version, newest, known)
