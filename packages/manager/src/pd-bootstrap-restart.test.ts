import { createConnection } from 'node:net';
import type { InferenceRoleSpec } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { InferenceManager, type RouterRegistrar } from './inference-manager.ts';
import { SimLauncher } from './launchers.ts';
import { layoutRole, planConfig } from './testing.ts';

/** Records what the manager registers and removes, as a PD router would receive it. */
class RecordingRouter implements RouterRegistrar {
  readonly log: Array<{ op: 'add' | 'remove'; url: string; worker_type?: string; bootstrap_port?: number }> =
    [];
  async addWorker(req: { url: string; worker_type?: string; bootstrap_port?: number }): Promise<unknown> {
    this.log.push({ op: 'add', ...req });
    return { api: 'workers' };
  }
  async removeWorker(url: string): Promise<void> {
    this.log.push({ op: 'remove', url });
  }
}

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

let manager: InferenceManager | undefined;
afterEach(async () => {
  await manager?.shutdown();
  manager = undefined;
});

describe('a restarted PD prefill worker', { timeout: 120_000 }, () => {
  it('comes back on a bootstrap port of its own, and the router is told the new one', async () => {
    const { plan, roles } = planConfig({
      cluster: { nodes: [{ name: 'node-0', gpus: 4 }] },
      training: { actor_gpus: 0 },
      roles: {
        rollout: layoutRole('decoupled', {
          name: 'policy',
          weight_source: 'disk',
          route_mode: 'sglang_router',
          engine_groups: [
            { worker_type: 'prefill', num_gpus: 2, gpus_per_engine: 2 },
            { worker_type: 'decode', num_gpus: 2, gpus_per_engine: 2 },
          ],
        }),
      },
    });
    const router = new RecordingRouter();
    manager = new InferenceManager({
      role: roles.rollout as InferenceRoleSpec,
      placements: plan.placements,
      pools: plan.pools,
      launcher: new SimLauncher(),
      routers: { policy: router },
      options: { healthIntervalMs: 100, startDeadlineMs: 30_000 },
    });
    await manager.start();
    const first = router.log.find((w) => w.worker_type === 'prefill');
    const engineId = manager
      .snapshot()
      .models.policy?.replicas.find((r) => r.base_url === first?.url)?.engine_id;
    expect(first?.bootstrap_port).toBeGreaterThan(0);
    router.log.length = 0;

    await manager.restartReplica(engineId as string);
    // The old worker leaves the router before the new one joins with the port its new engine bound.
    expect(router.log.map((w) => w.op)).toEqual(['remove', 'add']);
    expect(router.log[0]?.url).toBe(first?.url);
    const again = router.log[1];
    expect(again).toMatchObject({ worker_type: 'prefill', bootstrap_port: expect.any(Number) });
    expect(again?.url).toBe(
      manager.snapshot().models.policy?.replicas.find((r) => r.engine_id === engineId)?.base_url,
    );
    expect(await listening(again?.bootstrap_port as number)).toBe(true);
  });
});
