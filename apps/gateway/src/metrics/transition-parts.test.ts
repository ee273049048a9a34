import type { AuditEvent } from '@uis/manager';
import { describe, expect, it } from 'vitest';
import { GatewayMetrics } from './gateway-metrics.ts';
import { coveredMs } from './intervals.ts';
import { TransitionParts } from './transition-parts.ts';

const none = {
  inFlight: () => [],
  replicaStates: () => [],
  topologyRevisions: () => [],
  batchCounts: () => [],
};

let seq = 0;
function ev(
  kind: string,
  at: number,
  duration_ms: number | null,
  data: Record<string, unknown>,
  subject = 'g',
): AuditEvent {
  return { seq: ++seq, at, kind, subject, actor: null, operation_id: null, duration_ms, data };
}

async function sums(m: GatewayMetrics): Promise<Record<string, number>> {
  const json = await m.transitionParts.get();
  const out: Record<string, number> = {};
  for (const v of json.values)
    if (v.metricName === 'uis_phase_transition_part_duration_seconds_sum')
      out[String(v.labels.part)] = v.value;
  return out;
}

describe('TransitionParts', () => {
  it('splits a transition into release, onload without its weight syncs, weight sync and batch run', async () => {
    const m = new GatewayMetrics(none, { processMetrics: false });
    const parts = new TransitionParts(m);
    parts.observe(ev('transition.step', 2_000, 2_000, { step: 'offload', phase: 'rollout' }));
    // Two replicas sync in parallel inside the onload window [2000, 7000]: 1000..3000 counted once.
    parts.observe(ev('replica.weights_synced', 5_000, 2_000, {}, 'policy/0'));
    parts.observe(ev('replica.weights_synced', 5_500, 2_500, {}, 'policy/1'));
    parts.observe(ev('transition.step', 7_000, 5_000, { step: 'onload', phase: 'rollout' }));
    parts.observe(ev('transition.step', 8_000, 1_000, { step: 'tasks', phase: 'rollout' }));
    parts.barrierWait('g', 500);
    expect(await sums(m)).toEqual({
      release: 2,
      onload: 2.5,
      weight_sync: 2.5,
      batch_run: 1,
      barrier_wait: 0.5,
    });
  });

  it('counts overlapping intervals once and clips them to the window', () => {
    expect(
      coveredMs(
        [
          { from: 0, to: 10 },
          { from: 5, to: 20 },
          { from: 30, to: 40 },
        ],
        { from: 8, to: 35 },
      ),
    ).toBe(17);
    expect(coveredMs([], { from: 0, to: 1 })).toBe(0);
  });
});
