/** A time interval in milliseconds, `from <= to`. */
export interface Interval {
  from: number;
  to: number;
}

/** Length of the union of `intervals` inside `window` (overlaps count once: replicas sync in parallel). */
export function coveredMs(intervals: readonly Interval[], window: Interval): number {
  const clipped = intervals
    .map((i) => ({ from: Math.max(i.from, window.from), to: Math.min(i.to, window.to) }))
    .filter((i) => i.to > i.from)
    .sort((a, b) => a.from - b.from);
  let total = 0;
  let end = -Infinity;
  for (const i of clipped) {
    if (i.to <= end) continue;
    total += i.to - Math.max(i.from, end);
    end = i.to;
  }
  return total;
}
