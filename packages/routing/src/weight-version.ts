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

/** True when `version` is at or above `min`. A replica that reports no version never satisfies a minimum. */
export function meetsMinWeightVersion(version: string | null | undefined, min: string): boolean {
  if (version === null || version === undefined) return false;
  return compareWeightVersions(version, min) >= 0;
}
