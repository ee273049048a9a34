import { deferPhases } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { type GpuTimeInput, gpuTimeSteps, type TimelineEvent } from './gpu-time.ts';

const group = {
  name: 'actor',
  pool: 'actor',
  phases: deferPhases(['genrm']),
};
const ev = (
  kind: string,
  at: number,
  data: Record<string, unknown>,
  duration_ms: number | null = null,
  subject = 'actor',
): TimelineEvent => ({
  kind,
  subject,
  at,
  duration_ms,
  data,
});

/** One RL step on 4 bundles, rollout on bundles 0-1 only, times in ms:
 *  0-10000 rollout serves; 10000 advance: release rollout 10000-11000, onload genrm 11000-12000, batch 12000-15000,
 *  genrm_score entered 15000; next hop: release genrm 15000-15500, onload train (nothing) 15500-15500, train
 *  entered 15600; trainer trains till 20000, releases: transition 20000: release 20000-20100, onload rollout
 *  20100-22100 of which weight sync 20600-21600; rollout entered 22200. A barrier wait for train 9000-15600. */
const events: TimelineEvent[] = [
  ev('phase.entered', 0, { phase: 'rollout' }),
  ev('transition.started', 10_000, { from: 'rollout', to: 'genrm_score' }),
  ev('transition.step', 11_000, { step: 'offload', phase: 'genrm_score' }, 1_000),
  ev('transition.step', 12_000, { step: 'onload', phase: 'genrm_score' }, 1_000),
  ev('transition.step', 15_000, { step: 'tasks', phase: 'genrm_score' }, 3_000),
  ev('phase.entered', 15_000, { phase: 'genrm_score' }),
  ev('transition.step', 15_500, { step: 'offload', phase: 'train' }, 500),
  ev('transition.step', 15_500, { step: 'onload', phase: 'train' }, 0),
  ev('phase.entered', 15_600, { phase: 'train' }),
  ev('transition.started', 20_000, { from: 'train', to: 'rollout' }),
  ev('transition.step', 20_100, { step: 'offload', phase: 'rollout' }, 100),
  ev('replica.weights_synced', 21_600, {}, 1_000, 'policy/0'),
  ev('replica.weights_synced', 21_500, {}, 800, 'policy/1'),
  ev('transition.step', 22_100, { step: 'onload', phase: 'rollout' }, 2_000),
  ev('phase.entered', 22_200, { phase: 'rollout' }),
];
const input: GpuTimeInput = {
  group,
  bundles: [0, 1, 2, 3],
  bundlesOf: (role) => (role === 'rollout' ? [0, 1] : role === 'genrm' ? [0, 1, 2, 3] : []),
  events,
  barriers: [{ group: null, phase: 'train', from: 9_000, to: 15_600 }],
};

describe('gpuTimeSteps', () => {
  const [step] = gpuTimeSteps(input);

  it('cuts steps at each entry into the first phase and accounts every bundle-second once', () => {
    expect(gpuTimeSteps(input)).toHaveLength(1);
    expect(step).toMatchObject({ step: 1, from: 0, to: 22_200 });
    const total = Object.values(step!.gpu_seconds).reduce((a, b) => a + b, 0);
    expect(total).toBeCloseTo(4 * 22.2, 6);
    expect(Object.values(step!.shares).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
    for (const b of step!.bundles) {
      const covered = b.segments.reduce((n, s) => n + (s.to - s.from), 0);
      expect(covered).toBe(22_200);
    }
  });

  it('matches the transition records: release, onload less weight sync, weight sync, batch run, barrier wait', () => {
    const s = step!.gpu_seconds;
    // Release: rollout's (2 bundles x 1 s) + genrm's (4 x 0.5 s) + train's (4 bundles x 0.1 s).
    expect(s.release).toBeCloseTo(2 * 1 + 4 * 0.5 + 4 * 0.1, 6);
    // Weight sync: the union 20.6-21.6 s on rollout's 2 bundles; onload: genrm 4 x 1 s + rollout 2 x (2 - 1) s.
    expect(s.weight_sync).toBeCloseTo(2 * 1, 6);
    expect(s.onload).toBeCloseTo(4 * 1 + 2 * 1, 6);
    expect(s.batch_run).toBeCloseTo(4 * 3, 6);
    // The trainer waited from 9 s while rollout held its 2 bundles (9-10 s) and genrm its 4 (15-15.5 s is release,
    // not held): 2 x 1 s.
    expect(s.barrier_wait).toBeCloseTo(2 * 1, 6);
    // Training: 15.6-20 s on all 4 bundles; rollout serving 0-9 s on 2 bundles.
    expect(s.work).toBeCloseTo(4 * 4.4 + 2 * 9, 6);
  });

  it('draws a Gantt per bundle: who held it, with the bubbles between', () => {
    const b0 = step!.bundles
      .find((b) => b.bundle === 0)!
      .segments.map((x) => [x.part, x.holder, x.from, x.to]);
    expect(b0.slice(0, 4)).toEqual([
      ['work', 'rollout', 0, 9_000],
      ['barrier_wait', 'rollout', 9_000, 10_000],
      ['release', 'rollout', 10_000, 11_000],
      ['onload', 'genrm', 11_000, 12_000],
    ]);
    const b3 = step!.bundles.find((b) => b.bundle === 3)!.segments;
    // Rollout does not use bundle 3: idle while it serves and while it releases.
    expect(b3[0]).toMatchObject({ part: 'other', holder: 'idle', from: 0, to: 11_000 });
    expect(b3.find((x) => x.part === 'work')).toMatchObject({ holder: 'train', from: 15_600, to: 20_000 });
  });
});
