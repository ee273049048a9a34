import { waitFor } from '@uis/sglang-engine/testing';
import { afterEach, describe, expect, it } from 'vitest';
import type { InferenceManager, RouterRegistrar } from './inference-manager.ts';
import { simRolloutManager } from './testing.ts';

/** Holds worker URLs like a router; its removals fail while `failRemovals` > 0. */
class FlakyRouter implements RouterRegistrar {
  readonly workers = new Set<string>();
  failRemovals = 0;
  async addWorker(req: { url: string }): Promise<unknown> {
    this.workers.add(req.url);
    return { api: 'workers' };
  }
  async removeWorker(url: string): Promise<void> {
    if (this.failRemovals > 0) {
      this.failRemovals--;
      throw new Error('router answered 503');
    }
    this.workers.delete(url);
  }
}

let manager: InferenceManager | undefined;
afterEach(async () => {
  await manager?.shutdown();
  manager = undefined;
});

describe('router entries of a replica that dies', { timeout: 120_000 }, () => {
  it('a removal the router refused does not keep the restarted replica out of the router, and is retried', async () => {
    const router = new FlakyRouter();
    manager = simRolloutManager(
      {
        name: 'policy',
        weight_source: 'disk',
        route_mode: 'sglang_router',
        fault_tolerance_enabled: true,
        engine_groups: [{ num_gpus: 4, gpus_per_engine: 2 }],
      },
      {
        routers: { policy: router },
        options: { healthIntervalMs: 100, healthTimeoutMs: 2_000, failuresToDead: 2, restartBackoffMs: 100 },
      },
    );
    await manager.start();
    const replica = () => manager?.snapshot().models.policy?.replicas.find((r) => r.engine_id === 'policy/0');
    const oldUrl = replica()?.base_url as string;
    expect([...router.workers]).toContain(oldUrl);
    router.failRemovals = 1;
    process.kill(replica()?.pids[0] as number, 'SIGKILL');
    // It comes back on another port and is in the router; the entry of the dead incarnation is gone too.
    await waitFor(
      () => (replica()?.generation ?? 0) >= 1 && replica()?.state === 'ready',
      60_000,
      'the restart',
    );
    const newUrl = replica()?.base_url as string;
    expect(newUrl).not.toBe(oldUrl);
    await waitFor(
      () => router.workers.has(newUrl) && !router.workers.has(oldUrl),
      60_000,
      'the router to hold the new URL only',
    );
    expect(router.failRemovals).toBe(0);
  });
});
