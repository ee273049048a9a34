import type { TimeSeries, TimeSeriesPoint, TimeSeriesUpdate } from '@uis/spec';

/** What the ring needs of one finished request. */
export interface RingSample {
  role: string;
  model: string;
  status: number;
  totalMs: number;
  /** Streamed answers only. */
  ttftMs?: number | undefined;
  tokens: number;
  /** Epoch ms when it finished. */
  at: number;
}

/** Latency bucket upper bounds in ms: x1.5 from 1 ms to ~30 min, then everything above. */
const BOUNDS: number[] = [];
for (let b = 1; b < 2_000_000; b *= 1.5) BOUNDS.push(b);
BOUNDS.push(Number.POSITIVE_INFINITY);

/** A percentile of a bucketed histogram, interpolated inside its bucket (as Prometheus' histogram_quantile). */
function percentile(counts: Uint32Array, total: number, q: number): number | null {
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    const c = counts[i] as number;
    if (seen + c >= rank && c > 0) {
      const lo = i === 0 ? 0 : (BOUNDS[i - 1] as number);
      const hi = BOUNDS[i] as number;
      if (!Number.isFinite(hi)) return lo;
      return lo + ((hi - lo) * (rank - seen)) / c;
    }
    seen += c;
  }
  return BOUNDS[BOUNDS.length - 2] as number;
}

const LOG_GROWTH = Math.log(1.5);

/** The first bucket whose bound is >= `ms`: from the logarithm, started two buckets low (a margin far beyond its
 * rounding against the multiplied-out bounds), then walked up at most three bounds. A long stream's latency takes
 * no walk over ~30 buckets. */
export function bucketOf(ms: number): number {
  let i = ms > 1 ? Math.max(0, Math.min(BOUNDS.length - 1, Math.ceil(Math.log(ms) / LOG_GROWTH)) - 2) : 0;
  while (ms > (BOUNDS[i] as number)) i++;
  return i;
}

/** One second of one series. */
class Slot {
  second = -1;
  requests = 0;
  tokens = 0;
  errors = new Map<string, number>();
  latency = new Uint32Array(BOUNDS.length);
  latencyCount = 0;
  ttft = new Uint32Array(BOUNDS.length);
  ttftCount = 0;

  reset(second: number): void {
    this.second = second;
    this.requests = 0;
    this.tokens = 0;
    this.errors.clear();
    this.latency.fill(0);
    this.latencyCount = 0;
    this.ttft.fill(0);
    this.ttftCount = 0;
  }
}

interface Series {
  role: string;
  model: string;
  slots: Array<Slot | undefined>;
}

/**
 * Per role+model serving time series over the last `windowS` seconds at 1 s resolution, in memory (no Prometheus
 * server needed): a ring of per-second slots, each with counts and bucketed latency/TTFT histograms, so memory is
 * bounded by series x window whatever the request rate. Percentiles are over the trailing `percentileS` seconds.
 */
export class TimeSeriesRing {
  readonly #series = new Map<string, Series>();
  #last: Series | undefined;

  constructor(
    readonly windowS = 900,
    readonly percentileS = 10,
    /** When the service started (epoch ms): no point is older, so a chart starts there, not a window before. */
    readonly startedAtMs = Number.NEGATIVE_INFINITY,
  ) {}

  record(s: RingSample): void {
    this.add(s.role, s.model, s.status, s.totalMs, s.ttftMs, s.tokens, s.at);
  }

  /** `record` without a sample object (the serving path calls this once per request). */
  add(
    role: string,
    model: string,
    status: number,
    totalMs: number,
    ttftMs: number | undefined,
    tokens: number,
    at: number,
  ): void {
    // Requests come in runs of one role and model: the last series is checked before building a key.
    let series = this.#last;
    if (series === undefined || series.role !== role || series.model !== model) {
      const key = `${role}\u0000${model}`;
      series = this.#series.get(key);
      if (series === undefined) {
        series = { role, model, slots: new Array(this.windowS) };
        this.#series.set(key, series);
      }
      this.#last = series;
    }
    const second = Math.floor(at / 1000);
    const index = second % this.windowS;
    let slot = series.slots[index];
    if (slot === undefined) {
      slot = new Slot();
      series.slots[index] = slot;
    }
    if (slot.second !== second) slot.reset(second);
    slot.requests++;
    slot.tokens += tokens;
    if (status >= 400 || status === 0) {
      const k = String(status);
      slot.errors.set(k, (slot.errors.get(k) ?? 0) + 1);
    }
    slot.latency[bucketOf(totalMs)]!++;
    slot.latencyCount++;
    if (ttftMs !== undefined) {
      slot.ttft[bucketOf(ttftMs)]!++;
      slot.ttftCount++;
    }
  }

  #slot(series: Series, second: number): Slot | undefined {
    const slot = series.slots[second % this.windowS];
    return slot?.second === second ? slot : undefined;
  }

  #point(series: Series, second: number): TimeSeriesPoint {
    const slot = this.#slot(series, second);
    const lat = new Uint32Array(BOUNDS.length);
    const ttft = new Uint32Array(BOUNDS.length);
    let latN = 0;
    let ttftN = 0;
    for (let s = second - this.percentileS + 1; s <= second; s++) {
      const x = this.#slot(series, s);
      if (x === undefined) continue;
      for (let i = 0; i < BOUNDS.length; i++) {
        lat[i]! += x.latency[i] as number;
        ttft[i]! += x.ttft[i] as number;
      }
      latN += x.latencyCount;
      ttftN += x.ttftCount;
    }
    return {
      t: second * 1000,
      requests_per_s: slot?.requests ?? 0,
      tokens_per_s: slot?.tokens ?? 0,
      latency_p50_ms: percentile(lat, latN, 0.5),
      latency_p99_ms: percentile(lat, latN, 0.99),
      ttft_p50_ms: percentile(ttft, ttftN, 0.5),
      ttft_p99_ms: percentile(ttft, ttftN, 0.99),
      errors: slot === undefined ? {} : Object.fromEntries(slot.errors),
    };
  }

  /** Completed seconds after `afterSecond` (the whole window when undefined) up to the one before `nowMs`'s. */
  update(nowMs: number, afterSecond?: number): TimeSeriesUpdate & { last_second: number } {
    const last = Math.floor(nowMs / 1000) - 1;
    const first = Math.max(
      last - this.windowS + 1,
      Math.floor(this.startedAtMs / 1000),
      afterSecond === undefined ? -Infinity : afterSecond + 1,
    );
    const series: TimeSeries[] = [];
    for (const s of this.#series.values()) {
      const points: TimeSeriesPoint[] = [];
      for (let second = first; second <= last; second++) points.push(this.#point(s, second));
      series.push({ role: s.role, model: s.model, points });
    }
    return { full: afterSecond === undefined, window_s: this.windowS, series, last_second: last };
  }
}
