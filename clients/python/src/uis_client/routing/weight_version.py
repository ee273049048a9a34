"""Weight-version order of ``packages/routing/src/weight-version.ts``."""

from __future__ import annotations

import re
from collections.abc import Iterable

_NUMERIC = re.compile(r"\s*-?[0-9]+(\.[0-9]+)?\s*")


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def compare_weight_versions(a: str, b: str) -> int:
    """Numerically when both are plain decimal numbers ("9" < "10"), else by UTF-16 code units as JavaScript
    compares strings ("v10" < "v9")."""
    if _NUMERIC.fullmatch(a) and _NUMERIC.fullmatch(b):
        d = float(a) - float(b)
        return -1 if d < 0 else 1 if d > 0 else 0
    ua, ub = _utf16(a), _utf16(b)
    return -1 if ua < ub else 1 if ua > ub else 0


def versions_behind(version: str, newest: str, known: Iterable[str]) -> int | float:
    """``versionsBehind``: the difference when both are plain numbers, else how many distinct versions of ``known``
    are above ``version`` and at or below ``newest``; 0 when ``version`` is at or above ``newest``."""
    if compare_weight_versions(version, newest) >= 0:
        return 0
    if _NUMERIC.fullmatch(version) and _NUMERIC.fullmatch(newest):
        return float(newest) - float(version)
    between = {v for v in known if compare_weight_versions(v, version) > 0 and compare_weight_versions(v, newest) <= 0}
    between.add(newest)
    return len(between)


def meets_min_weight_version(version: str | None, minimum: str) -> bool:
    """A replica without a version never satisfies a minimum."""
    return version is not None and compare_weight_versions(version, minimum) >= 0
