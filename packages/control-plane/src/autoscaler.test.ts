import { layoutRole } from '@uis/manager/testing';
import { ManualClock } from '@uis/sglang-engine/testing';
import { parseConfig, silentLogger } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { type AutoscalePolicy, Autoscaler, decideScale, parseEngineMetrics } from './autoscaler.ts';
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

  it("reads SGLang's gauges from an engine's Prometheus text, summing queues over DP ranks", () => {
    const text = [
      '# TYPE sglang:num_queue_reqs gauge',
      'sglang:num_queue_reqs{model_name="p",dp_rank="0"} 3.0',
      'sglang:num_queue_reqs{model_name="p",dp_rank="1"} 1.0',
      'sglang:token_usage{model_name="p",dp_rank="0"} 0.5',
      'sglang:token_usage{model_name="p",dp_rank="1"} 0.25',
    ].join('\n');
    expect(parseEngineMetrics(text)).toEqual({ queue: 4, tokenUsage: 0.375 });
    expect(parseEngineMetrics('up 1')).toBeNull();
  });
});

const launchers: InProcessSimLauncher[] = [];
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
});

describe('Autoscaler on live engines', { timeout: 120_000 }, () => {
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
    } finally {
      scaler.stop();
      await plane.stop();
    }
  });
});
