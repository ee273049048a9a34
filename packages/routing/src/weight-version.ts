const NUMERIC = /^\s*-?\d+(\.\d+)?\s*$/;

/** Orders weight versions: numerically when both parse as plain decimal numbers ("9" < "10"), otherwise by
 * string comparison of code units ("v10" < "v9": use zero-padded or numeric versions to order them). */
export function compareWeightVersions(a: string, b: string): number {
  if (NUMERIC.test(a) && NUMERIC.test(b)) {
    const d = Number(a) - Number(b);
    return d < 0 ? -1 : d > 0 ? 1 : 0;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * How many versions `version` is behind `newest`: their difference when both are plain numbers (step counters, as
 * AReaL's versions are); otherwise how many distinct versions of `known` are above `version` and at or below
 * `newest` (the versions a model went through that the caller knows of). 0 when `version` is at or above
 * `newest`.
 */
export function versionsBehind(version: string, newest: string, known: Iterable<string>): number {
  if (compareWeightVersions(version, newest) >= 0) return 0;
  if (NUMERIC.test(version) && NUMERIC.test(newest)) return Number(newest) - Number(version);
  const between = new Set<string>();
  for (const v of known)
    if (compareWeightVersions(v, version) > 0 && compareWeightVersions(v, newest) <= 0) between.add(v);
  between.add(newest);
  return between.size;
}

/** True when `version` is at or above `min`. A replica that reports no version never satisfies a minimum. */
export function meetsMinWeightVersion(version: string | null | undefined, min: string): boolean {
  if (version === null || version === undefined) return false;
  return compareWeightVersions(version, min) >= 0;
}
