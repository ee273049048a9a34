/** Latency samples in a growable Float64Array (millions of samples stay cheap), with percentiles. */
export class Samples {
  #data = new Float64Array(1024);
  #n = 0;

  add(v: number): void {
    if (this.#n === this.#data.length) {
      const next = new Float64Array(this.#data.length * 2);
      next.set(this.#data);
      this.#data = next;
    }
    this.#data[this.#n++] = v;
  }

  get count(): number {
    return this.#n;
  }

  /** Percentiles (0-100) by nearest rank. */
  percentiles(ps: readonly number[]): number[] {
    if (this.#n === 0) return ps.map(() => Number.NaN);
    const sorted = this.#data.slice(0, this.#n).sort();
    return ps.map((p) => sorted[Math.min(this.#n - 1, Math.max(0, Math.ceil((p / 100) * this.#n) - 1))]!);
  }
}

export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  count: number;
}

export function summarize(s: Samples): LatencySummary {
  const [p50, p90, p99] = s.percentiles([50, 90, 99]);
  return { p50: p50!, p90: p90!, p99: p99!, count: s.count };
}

/** What a load generator prints (one JSON line) at the end of a run. */
export interface LoadResult {
  durationS: number;
  requests: number;
  errors: number;
  /** SSE events (`\n\n`-terminated) relayed to the client. */
  events: number;
  /** Response body deliveries seen by the client socket. */
  chunks: number;
  ttfbMs: LatencySummary;
  totalMs: LatencySummary;
  gapMs: LatencySummary;
  /** TCP connections the generator opened during the measured window (keep-alive should make this 0). */
  connects?: number;
  /** The generator's own event-loop delay over the window: high means it, not the proxy, was the bottleneck. */
  loopDelayMs?: { p50: number; p99: number; max: number };
}
