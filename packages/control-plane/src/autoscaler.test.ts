import { layoutRole } from '@uis/manager/testing';
import { ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { parseConfig, silentLogger } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type AutoscalePolicy,
  Autoscaler,
  autoscalePolicies,
  decideScale,
  histogramDelta,
  histogramQuantile,
  parseEngineMetrics,
} from './autoscaler.ts';
import { createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';

const policy: AutoscalePolicy = {
  role: 'rollout',
  model: 'policy',
  min_replicas: 2,
  max_replicas: 4,
  queue_per_replica: 2,
  token_usage_high: 0.9,
  token_usage_low: 0.3,
  cooldown_s: 60,
};
const idle = { queue: 0, tokenUsage: 0.1 };

describe('decideScale', () => {
  it.each([
    [
      'a queue over the threshold scales out to absorb it',
      2,
      [{ queue: 5, tokenUsage: 0.2 }, idle],
      null,
      'scale_out',
      3,
    ],
    [
      'high KV use scales out by one',
      2,
      [
        { queue: 0, tokenUsage: 0.95 },
        { queue: 0, tokenUsage: 0.95 },
      ],
      null,
      'scale_out',
      3,
    ],
    ['never past max_replicas', 4, [{ queue: 40, tokenUsage: 0.5 }, idle, idle, idle], null, 'none', 4],
    ['a large queue jumps, capped at max', 2, [{ queue: 30, tokenUsage: 0.5 }, idle], null, 'scale_out', 4],
    ['not within the cooldown', 2, [{ queue: 9, tokenUsage: 0.5 }, idle], 30, 'none', 2],
    ['after the cooldown', 2, [{ queue: 9, tokenUsage: 0.5 }, idle], 61, 'scale_out', 4],
    ['idle scales in one at a time', 3, [idle, idle, idle], 61, 'scale_in', 2],
    ['never below min_replicas', 2, [idle, idle], null, 'none', 2],
    ['no decision on partial metrics', 3, [idle, idle], null, 'none', 3],
  ] as const)('%s', (_name, n, samples, since, action, target) => {
    const d = decideScale(policy, n, samples, since);
    expect([d.action, d.target]).toEqual([action, target]);
    expect(d.reason.length).toBeGreaterThan(0);
  });

  it('scales out on the P95 queue time when the policy sets a threshold (the slowest engine counts)', () => {
    const withP95 = { ...policy, queue_time_p95_s: 5 };
    const slow = { queue: 1, tokenUsage: 0.2, queueTimeP95: 7.5 };
    expect(decideScale(withP95, 2, [slow, idle], null)).toMatchObject({
      action: 'scale_out',
      target: 3,
      reason: 'queue time P95 7.5 s > 5 s',
      metrics: { queue_time_p95: 7.5 },
    });
    // Past the last finite bucket counts as high, as in Relax.
    const overflow = { ...slow, queueTimeP95: Number.POSITIVE_INFINITY };
    expect(decideScale(withP95, 2, [overflow, idle], null).action).toBe('scale_out');
    // Without the threshold the same readings are within thresholds.
    expect(decideScale(policy, 2, [slow, idle], null).action).toBe('none');
  });

  it('takes the P95 of a cumulative histogram by interpolating in its bucket, over the window between readings', () => {
    const inf = Number.POSITIVE_INFINITY;
    const h = new Map([
      [0.5, 50],
      [1, 90],
      [5, 100],
      [inf, 100],
    ]);
    // Rank 95 of 100 lies half-way through the (1, 5] bucket.
    expect(histogramQuantile(h, 0.95)).toBeCloseTo(3, 6);
    expect(histogramQuantile(new Map([[inf, 0]]), 0.95)).toBeNull();
    expect(
      histogramQuantile(
        new Map([
          [1, 1],
          [inf, 10],
        ]),
        0.95,
      ),
    ).toBe(inf);
    // Only what was queued since the previous reading; a restarted engine (counts went down) starts over.
    const later = new Map([
      [0.5, 50],
      [1, 90],
      [5, 100],
      [inf, 110],
    ]);
    expect(histogramQuantile(histogramDelta(later, h), 0.95)).toBe(inf);
    expect(histogramDelta(new Map([[inf, 3]]), h).get(inf)).toBe(3);
  });

  it('builds one policy per model with an autoscale block, ticking at the shortest interval', () => {
    const config = parseConfig({
      cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
      roles: {
        rollout: layoutRole('decoupled', {
          name: 'policy',
          weight_source: 'disk',
          elastic_enabled: true,
          autoscale: { min_replicas: 2, max_replicas: 4, interval_s: 2.5, queue_time_p95_s: 5 },
          engine_groups: [
            { num_gpus: 2, gpus_per_engine: 1, server_args: { enable_metrics: true } },
            { worker_type: 'placeholder', num_gpus: 2, gpus_per_engine: 1 },
          ],
        }),
      },
    });
    expect(autoscalePolicies(config)).toEqual({
      intervalMs: 2500,
      policies: [
        {
          role: 'rollout',
          model: 'policy',
          min_replicas: 2,
          max_replicas: 4,
          queue_per_replica: 10,
          token_usage_high: 0.85,
          token_usage_low: 0.3,
          queue_time_p95_s: 5,
          cooldown_s: 60,
        },
      ],
    });
    expect(autoscalePolicies(parseConfig({ cluster: config.cluster, roles: {} }))).toBeNull();
  });

  it("reads SGLang's gauges from an engine's Prometheus text, summing queues over DP ranks", () => {
    const text = [
      '# TYPE sglang:num_queue_reqs gauge',
      'sglang:num_queue_reqs{model_name="p",dp_rank="0"} 3.0',
      'sglang:num_queue_reqs{model_name="p",dp_rank="1"} 1.0',
      'sglang:token_usage{model_name="p",dp_rank="0"} 0.5',
      'sglang:token_usage{model_name="p",dp_rank="1"} 0.25',
    ].join('\n');
    expect(parseEngineMetrics(text)).toEqual({ queue: 4, tokenUsage: 0.375, running: 0 });
    const withHistogram = [
      text,
      'sglang:queue_time_seconds_bucket{model_name="p",le="0.5"} 2.0',
      'sglang:queue_time_seconds_bucket{model_name="p",le="+Inf"} 3.0',
      'sglang:queue_time_seconds_count{model_name="p"} 3.0',
    ].join('\n');
    expect(parseEngineMetrics(withHistogram)?.queueTime).toEqual(
      new Map([
        [0.5, 2],
        [Number.POSITIVE_INFINITY, 3],
      ]),
    );
    expect(parseEngineMetrics('up 1')).toBeNull();
  });
});

const launchers: InProcessSimLauncher[] = [];
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
});

describe('Autoscaler on live engines', { timeout: 120_000 }, () => {
  it("runs from the config's autoscale block (no option needed): its decisions are audit events", async () => {
    const launcher = new InProcessSimLauncher();
    launchers.push(launcher);
    const plane = await createControlPlane({
      launcher,
      config: parseConfig({
        cluster: { nodes: [{ name: 'node-0', gpus: 2 }] },
        roles: {
          rollout: layoutRole('decoupled', {
            name: 'policy',
            weight_source: 'disk',
            elastic_enabled: true,
            autoscale: { min_replicas: 1, max_replicas: 2, interval_s: 0.1 },
            engine_groups: [
              { num_gpus: 1, gpus_per_engine: 1, server_args: { enable_metrics: true } },
              { worker_type: 'placeholder', num_gpus: 1, gpus_per_engine: 1 },
            ],
          }),
        },
      }),
    });
    try {
      const first = await waitFor(
        () => plane.events.list({ kind: 'autoscale.decision' })[0],
        30_000,
        'an autoscaler decision',
      );
      // The engine was launched with --enable-metrics from the config, and the decision read it.
      expect(first).toMatchObject({
        subject: 'rollout/policy',
        actor: 'autoscaler',
        data: { action: 'none', from: 1, target: 1, reason: 'within thresholds', metrics: { engines: 1 } },
      });
    } finally {
      await plane.stop();
    }
  });

  it('scales the model out under a burst (engine queues) and back in once idle and the cooldown passed', async () => {
    // One running slot per engine and slow decoding: a burst waits in the engines' queues.
    const launcher = new InProcessSimLauncher({
      enableMetrics: true,
      simMaxRunningRequests: 1,
      simDecodeUsPerToken: 20_000,
    });
    launchers.push(launcher);
    const plane = await createControlPlane({
      launcher,
      config: parseConfig({
        cluster: { nodes: [{ name: 'node-0', gpus: 4 }] },
        roles: {
          rollout: layoutRole('decoupled', {
            name: 'policy',
            weight_source: 'disk',
            elastic_enabled: true,
            engine_groups: [
              { num_gpus: 2, gpus_per_engine: 1 },
              { worker_type: 'placeholder', num_gpus: 2, gpus_per_engine: 1 },
            ],
          }),
        },
      }),
    });
    const clock = new ManualClock(1_000_000);
    const scaler = new Autoscaler([policy], plane.managers, plane.scale, plane.events, clock, silentLogger);
    try {
      expect((await scaler.tick())[0]).toMatchObject({ action: 'none', reason: 'within thresholds' });
      const engines = plane.managerOf('rollout').eligibleEngines('policy');
      const burst = engines.flatMap((e) =>
        Array.from({ length: 4 }, () =>
          e.engine.client.generate({
            text: 'burst',
            sampling_params: { max_new_tokens: 40, ignore_eos: true },
          }),
        ),
      );
      let up = await scaler.tick();
      for (let i = 0; i < 20 && up[0]?.action !== 'scale_out'; i++) up = await scaler.tick();
      expect(up[0]).toMatchObject({ action: 'scale_out', from: 2, target: 3 });
      const outOp = plane.scale.list({ kind: 'scale_out' })[0];
      expect(outOp?.actor).toBe('autoscaler');
      expect((await plane.scale.settled(outOp?.request_id as string)).status).toBe('ACTIVE');
      await Promise.all(burst);
      // Idle now, but within the cooldown: no action; past it: one replica goes.
      expect((await scaler.tick())[0]).toMatchObject({ action: 'none' });
      expect((await scaler.tick())[0]?.reason).toContain('cooling down');
      await clock.advance(61_000);
      const down = (await scaler.tick())[0];
      expect(down, down?.reason).toMatchObject({ action: 'scale_in', from: 3, target: 2 });
      const inOp = plane.scale.list({ kind: 'scale_in' })[0];
      expect((await plane.scale.settled(inOp?.request_id as string)).status).toBe('COMPLETED');
      // Every decision is an audit event with its reason and the metrics it saw.
      const decisions = plane.events.list({ kind: 'autoscale.decision', limit: 100 });
      expect(decisions.map((e) => (e.data as { action: string }).action)).toContain('scale_out');
      expect(
        decisions.every((e) => typeof (e.data as { metrics: { queue: number } }).metrics.queue === 'number'),
      ).toBe(true);
      // Quiet ticks after a quiet one are not recorded (the first after an action is).
      await scaler.tick();
      const recorded = plane.events.list({ kind: 'autoscale.decision', limit: 1000 }).length;
      await scaler.tick();
      await scaler.tick();
      expect(plane.events.list({ kind: 'autoscale.decision', limit: 1000 })).toHaveLength(recorded);
    } finally {
      scaler.stop();
      await plane.stop();
    }
  });
});
