import { isUisError } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import type { InferenceManager } from './inference-manager.ts';
import { simRolloutManager } from './testing.ts';

let manager: InferenceManager | undefined;
afterEach(async () => {
  await manager?.shutdown();
  manager = undefined;
});

const INIT = {
  source: 'distributed' as const,
  action: 'init' as const,
  master_address: '127.0.0.1',
  master_port: 29500,
  world_size: 5,
};

describe('a held model and the trainer', { timeout: 60_000 }, () => {
  it('refuses a weight group no replica could join, naming the hold, instead of answering ok with no engine', async () => {
    manager = simRolloutManager({
      name: 'policy',
      weight_source: 'dcs',
      engine_groups: [{ num_gpus: 4, gpus_per_engine: 2 }],
    });
    await manager.start();
    await manager.drainModel('policy');
    const err = await manager.updateWeights('policy', INIT).catch((e: unknown) => e);
    expect(isUisError(err) && err.code).toBe('no_resident_replica');
    expect((err as Error).message).toContain('an operator drained the model');
    // Nor does an engine attached from outside serve it meanwhile.
    const attach = await manager.registerExternal('policy', 'http://127.0.0.1:9').catch((e: unknown) => e);
    expect(isUisError(attach) && attach.code).toBe('model_held');
    // Once activated, the replicas join.
    await manager.activateModel('policy');
    const init = await manager.updateWeights('policy', INIT);
    expect(init.engines.map((e) => e.ok)).toEqual([true, true]);
  });

  it("an operator's restart of an asleep replica stops it now and relaunches it when the model onloads", async () => {
    manager = simRolloutManager(
      { name: 'policy', weight_source: 'disk', engine_groups: [{ num_gpus: 4, gpus_per_engine: 2 }] },
      {},
      { offload: true },
    );
    await manager.start();
    await manager.drainModel('policy');
    const replica = () => manager?.snapshot().models.policy?.replicas.find((r) => r.engine_id === 'policy/0');
    const before = replica();
    expect(before?.state).toBe('sleeping');
    // Its GPUs may belong to another phase now: launching there is what must not happen.
    expect(await manager.restartReplica('policy/0')).toEqual({ restarted: false });
    expect(replica()).toMatchObject({ state: 'dead', pids: [] });
    await manager.activateModel('policy');
    expect(replica()).toMatchObject({ state: 'ready', generation: (before?.generation ?? 0) + 1 });
    // Awake, a restart is at once.
    expect(await manager.restartReplica('policy/0')).toEqual({ restarted: true });
    expect(replica()).toMatchObject({ state: 'ready', generation: (before?.generation ?? 0) + 2 });
  });
});
