import { describe, expect, it } from 'vitest';
import { bucketOf, TimeSeriesRing } from './time-series-ring.ts';

const T0 = 1_700_000_000_000;
const req = (at: number, totalMs: number, extra: Partial<Parameters<TimeSeriesRing['record']>[0]> = {}) => ({
  role: 'rollout',
  model: 'policy',
  status: 200,
  totalMs,
  tokens: 10,
  at,
  ...extra,
});

describe('TimeSeriesRing', () => {
  it('gives per-second rates, trailing percentiles and errors by status for completed seconds', () => {
    const ring = new TimeSeriesRing(60, 10);
    for (let i = 0; i < 100; i++) ring.record(req(T0 + i * 5, i < 98 ? 100 : 5_000, { ttftMs: 20 }));
    ring.record(req(T0 + 1_500, 50, { status: 503, tokens: 0 }));
    ring.record(req(T0 + 1_600, 50, { status: 0, tokens: 0 }));
    const u = ring.update(T0 + 2_000);
    expect(u.full).toBe(true);
    const points = u.series[0]?.points ?? [];
    expect(points).toHaveLength(60);
    const [first, second] = points.slice(-2);
    expect(first).toMatchObject({ t: T0, requests_per_s: 100, tokens_per_s: 1000, errors: {} });
    // 98 of 100 at 100 ms: the median is in the bucket holding 100 ms, p99 in the one holding 5 s.
    expect(first?.latency_p50_ms).toBeGreaterThan(60);
    expect(first?.latency_p50_ms).toBeLessThanOrEqual(100 * 1.5);
    expect(first?.latency_p99_ms).toBeGreaterThan(3_000);
    expect(first?.ttft_p50_ms).toBeGreaterThan(10);
    expect(first?.ttft_p50_ms).toBeLessThanOrEqual(30);
    expect(second).toMatchObject({ requests_per_s: 2, errors: { '503': 1, '0': 1 } });
    // The 10 s percentile window still holds the first second's answers.
    expect(second?.latency_p99_ms).toBeGreaterThan(3_000);
    expect(points[0]).toMatchObject({ requests_per_s: 0, latency_p50_ms: null });
  });

  it('starts at the second the service started, not a whole window before it existed', () => {
    const ring = new TimeSeriesRing(900, 10, T0 + 30_500);
    ring.record(req(T0 + 31_000, 10));
    const points = ring.update(T0 + 40_000).series[0]?.points ?? [];
    expect(points.map((p) => p.t)).toEqual(Array.from({ length: 10 }, (_, i) => T0 + 30_000 + i * 1000));
    expect(points[1]).toMatchObject({ t: T0 + 31_000, requests_per_s: 1 });
    // Once the service is older than the window, the window is what limits it.
    expect(ring.update(T0 + 2_000_000).series[0]?.points).toHaveLength(900);
  });

  it('sends only the seconds completed since the last push, and forgets what left the window', () => {
    const ring = new TimeSeriesRing(5, 1);
    ring.record(req(T0, 10));
    const full = ring.update(T0 + 1_000);
    const next = ring.update(T0 + 3_000, full.last_second);
    expect(next.full).toBe(false);
    expect(next.series[0]?.points.map((p) => p.t)).toEqual([T0 + 1_000, T0 + 2_000]);
    // Ten seconds later the slot of T0 is reused by T0 + 5 s: T0 is gone, not double counted.
    ring.record(req(T0 + 5_000, 10));
    const later = ring.update(T0 + 6_000);
    expect(later.series[0]?.points.map((p) => p.requests_per_s)).toEqual([0, 0, 0, 0, 1]);
  });
});

describe('bucketOf', () => {
  it('is the first bucket whose bound is at least the latency, at every bound, beside it and between bounds', () => {
    const bounds: number[] = [];
    for (let b = 1; b < 2_000_000; b *= 1.5) bounds.push(b);
    bounds.push(Number.POSITIVE_INFINITY);
    const walk = (ms: number) => {
      let i = 0;
      while (ms > bounds[i]!) i++;
      return i;
    };
    const values = [Number.NaN, -5, 0, 0.5, 1, 3e6, Number.POSITIVE_INFINITY];
    for (const b of bounds.slice(0, -1))
      values.push(b, b * (1 - 1e-15), b * (1 + 1e-15), b * 0.999, b * 1.001, b * 1.25);
    for (let ms = 0; ms < 5000; ms += 0.37) values.push(ms);
    for (const ms of values) expect([ms, bucketOf(ms)]).toEqual([ms, walk(ms)]);
  });
});
