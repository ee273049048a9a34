import { type InferenceRoleSpec, isUisError } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { EventLog } from './event-log.ts';
import { InferenceManager } from './inference-manager.ts';
import { SimLauncher } from './launchers.ts';
import { openStore } from './store.ts';
import { planConfig, splitConfig } from './testing.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

describe('update_weights from the tensors a colocated trainer shares', () => {
  it('replicas asleep load them when they onload (weights first), and the sync is recorded per replica', async () => {
    const { plan, roles } = planConfig(splitConfig({ rolloutSource: 'tensor' }));
    const db = openStore(':memory:');
    const events = new EventLog(db);
    const m = new InferenceManager({
      role: roles.rollout as InferenceRoleSpec,
      placements: plan.placements,
      pools: plan.pools,
      launcher: new SimLauncher(),
      events,
      options: { healthIntervalMs: 100, startDeadlineMs: 60_000 },
    });
    cleanups.push(async () => {
      await m.shutdown();
      db.close();
    });
    await m.start();
    await m.drain();
    const ids = m.registry.snapshot().models.policy?.engines.map((e) => e.engine_id) ?? [];
    expect(ids).toHaveLength(2);

    // One payload per TP rank of each replica (base64, as SGLang decodes it), for every replica and nothing else:
    // refused before any engine is called.
    const b64 = (x: string) => Buffer.from(x).toString('base64');
    const own = (id: string) => [b64(`ipc:${id}:0`), b64(`ipc:${id}:1`)];
    const [a, b] = ids as [string, string];
    const refusals: Array<[Record<string, string[]>, string]> = [
      [{ [a]: own(a) }, `body.per_engine.${b}`],
      [{ [a]: own(a), [b]: own(b), 'policy/9': own('policy/9') }, 'body.per_engine.policy/9'],
      [{ [a]: own(a), [b]: [b64('rank0 only')] }, `body.per_engine.${b}`],
    ];
    for (const [per_engine, path] of refusals) {
      const e = await m
        .updateWeights('policy', { source: 'tensor', weight_version: 'v2', per_engine })
        .catch((x: unknown) => x);
      expect(isUisError(e) && [e.code, e.path]).toEqual(['invalid_weight_update', path]);
    }
    expect(m.snapshot().models.policy?.replicas.map((r) => r.weight_version)).toEqual(['default', 'default']);

    await m.updateWeights('policy', {
      source: 'tensor',
      weight_version: 'v2',
      per_engine: { [a]: own(a), [b]: own(b) },
    });
    // Asleep: nothing loaded yet, the target moved.
    expect(m.registry.snapshot().models.policy?.engines.map((e) => [e.state, e.weight_version])).toEqual([
      ['sleeping', 'default'],
      ['sleeping', 'default'],
    ]);
    await m.activate();
    expect(m.registry.snapshot().models.policy?.engines.map((e) => [e.state, e.weight_version])).toEqual([
      ['ready', 'v2'],
      ['ready', 'v2'],
    ]);
    const synced = events.list({ kind: 'replica.weights_synced' });
    expect(synced.map((e) => [e.subject, e.data.weight_version]).sort()).toEqual(ids.map((id) => [id, 'v2']));
    // The update's audit event names the payload by its digest: tensors never go into the event log.
    const [op] = events.list({ kind: 'op.weights' });
    expect(op?.subject).toMatch(
      /^weights:policy:\{"source":"tensor","weight_version":"v2","sha256":"[0-9a-f]{16}"\}$/,
    );
    expect(JSON.stringify(events.list({}))).not.toContain(own(a)[0]);
  });
});
