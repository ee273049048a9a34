import { afterEach, describe, expect, it } from 'vitest';
import type { InferenceManager } from './inference-manager.ts';
import { portListening, RecordingRouter, simRolloutManager } from './testing.ts';

let manager: InferenceManager | undefined;
afterEach(async () => {
  await manager?.shutdown();
  manager = undefined;
});

/** A PD model behind a (recording) router: `prefill` prefill engines and one decode engine of 2 GPUs each. */
function pd(prefill: number, router: RecordingRouter): InferenceManager {
  return simRolloutManager(
    {
      name: 'policy',
      weight_source: 'disk',
      route_mode: 'sglang_router',
      engine_groups: [
        { worker_type: 'prefill', num_gpus: 2 * prefill, gpus_per_engine: 2 },
        { worker_type: 'decode', num_gpus: 2, gpus_per_engine: 2 },
      ],
    },
    { routers: { policy: router } },
    { gpus: 2 * prefill + 2 },
  );
}

describe('PD prefill workers on one host', { timeout: 120_000 }, () => {
  it('each gets a bootstrap port of its own, bound by the engine and registered with the router', async () => {
    const router = new RecordingRouter();
    // Real sglang-sim processes from the real command line: two prefill engines on SGLang's default bootstrap
    // port 8998 would make the second one fail to start.
    manager = pd(2, router);
    await manager.start();
    const byType = (t: string) => router.added().filter((w) => w.worker_type === t);
    const prefill = byType('prefill');
    expect(prefill).toHaveLength(2);
    const ports = prefill.map((w) => w.bootstrap_port);
    expect(ports.every((p) => typeof p === 'number' && p > 0 && p !== 8998)).toBe(true);
    expect(new Set(ports).size).toBe(2);
    for (const p of ports) expect(await portListening(p as number)).toBe(true);
    // A decode worker has no bootstrap port to register.
    expect(byType('decode')).toEqual([{ url: expect.any(String), worker_type: 'decode' }]);

    await manager.shutdown();
    manager = undefined;
    for (const p of ports) expect(await portListening(p as number)).toBe(false);
  });

  it('a restarted prefill worker comes back on a bootstrap port of its own, and the router is told the new one', async () => {
    const router = new RecordingRouter();
    manager = pd(1, router);
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
    expect(await portListening(again?.bootstrap_port as number)).toBe(true);
  });
});
