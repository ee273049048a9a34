import { describe, expect, it } from 'vitest';
import { mergeSeries } from './use-time-series.ts';

const point = (t: number, rps: number) => ({
  t,
  requests_per_s: rps,
  tokens_per_s: 0,
  latency_p50_ms: null,
  latency_p99_ms: null,
  ttft_p50_ms: null,
  ttft_p99_ms: null,
  errors: {},
});

describe('mergeSeries', () => {
  it('replaces on a full window, appends completed seconds and keeps only the window', () => {
    const full = mergeSeries([], {
      full: true,
      window_s: 3,
      series: [
        { role: 'rollout', model: 'policy', points: [point(1000, 1), point(2000, 2), point(3000, 3)] },
      ],
    });
    const next = mergeSeries(full, {
      full: false,
      window_s: 3,
      series: [
        { role: 'rollout', model: 'policy', points: [point(4000, 4)] },
        { role: 'genrm', model: 'judge', points: [point(4000, 9)] },
      ],
    });
    expect(next.find((s) => s.role === 'rollout')?.points.map((p) => p.requests_per_s)).toEqual([2, 3, 4]);
    expect(next.find((s) => s.role === 'genrm')?.points).toHaveLength(1);
  });

  it('refuses a push that is not a time-series update', () => {
    expect(() => mergeSeries([], { full: true })).toThrow();
  });
});
