import { createConnection } from 'node:net';
import type { InferenceRoleSpec } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { InferenceManager, type RouterRegistrar } from './inference-manager.ts';
import { SimLauncher } from './launchers.ts';
import { layoutRole, planConfig } from './testing.ts';

/** Records what the manager registers, as a PD router would receive it. */
class RecordingRouter implements RouterRegistrar {
  readonly added: Array<{ url: string; worker_type?: string; bootstrap_port?: number }> = [];
  async addWorker(req: { url: string; worker_type?: string; bootstrap_port?: number }): Promise<unknown> {
    this.added.push(req);
    return { api: 'workers' };
  }
  async removeWorker(): Promise<void> {}
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

describe('PD prefill workers on one host', { timeout: 120_000 }, () => {
  it('each gets a bootstrap port of its own, bound by the engine and registered with the router', async () => {
    const { plan, roles } = planConfig({
      cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
      training: { actor_gpus: 0 },
      roles: {
        rollout: layoutRole('decoupled', {
          name: 'policy',
          weight_source: 'disk',
          route_mode: 'sglang_router',
          engine_groups: [
            { worker_type: 'prefill', num_gpus: 4, gpus_per_engine: 2 },
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
      // Real sglang-sim processes from the real command line: two prefill engines on SGLang's default bootstrap
      // port 8998 would make the second one fail to start.
      launcher: new SimLauncher(),
      routers: { policy: router },
      // Three simulator processes start at once (each loads its sources through tsx): slow on a loaded machine.
      options: { healthIntervalMs: 100, startDeadlineMs: 60_000 },
    });
    await manager.start();
    const byType = (t: string) => router.added.filter((w) => w.worker_type === t);
    const prefill = byType('prefill');
    expect(prefill).toHaveLength(2);
    const ports = prefill.map((w) => w.bootstrap_port);
    expect(ports.every((p) => typeof p === 'number' && p > 0 && p !== 8998)).toBe(true);
    expect(new Set(ports).size).toBe(2);
    for (const p of ports) expect(await listening(p as number)).toBe(true);
    // A decode worker has no bootstrap port to register.
    expect(byType('decode')).toEqual([{ url: expect.any(String), worker_type: 'decode' }]);

    await manager.shutdown();
    manager = undefined;
    for (const p of ports) expect(await listening(p as number)).toBe(false);
  });
});
