import { alive, waitFor } from '@uis/sglang-engine/testing';
import { silentLogger, systemClock } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { EventLog } from '../event-log.ts';
import type { InferenceManager } from '../inference-manager.ts';
import { SimLauncher } from '../launchers.ts';
import { openStore } from '../store.ts';
import { simRolloutManager } from '../testing.ts';
import { stopEnginesOfRemovedRoles } from './adoption.ts';
import { EngineRecords } from './engine-records.ts';

// A control plane that "dies" is a manager that is never shut down (its health loop idles for an hour): its engines,
// launched without a watchdog, keep running, and a second manager on the same database finds them.
const HOUR = 3_600_000;
const abandoned: InferenceManager[] = [];
const managers: InferenceManager[] = [];
afterAll(async () => {
  await Promise.allSettled(managers.map((m) => m.shutdown()));
  // The abandoned ones' engines were adopted and stopped by their successors, or are stopped here.
  await Promise.allSettled(abandoned.map((m) => m.shutdown()));
});

const POLICY = {
  name: 'policy',
  weight_source: 'disk',
  engine_groups: [{ num_gpus: 2, gpus_per_engine: 1 }],
};

function manager(
  db: ReturnType<typeof openStore>,
  adoptEngines: boolean,
  model: Record<string, unknown> = POLICY,
): InferenceManager {
  const m = simRolloutManager(
    model as typeof POLICY,
    {
      launcher: new SimLauncher({ keepEngines: true }),
      store: db,
      events: new EventLog(db),
      adoptEngines,
      options: { healthIntervalMs: HOUR },
    },
    { gpus: 2, offload: true },
  );
  managers.push(m);
  return m;
}

const pidsOf = (m: InferenceManager) =>
  Object.fromEntries(m.snapshot().models.policy?.replicas.map((r) => [r.engine_id, r.pids]) ?? []);

/** Starts a manager and abandons it as a crashed control plane would. */
async function crashed(db: ReturnType<typeof openStore>, model: Record<string, unknown> = POLICY) {
  const first = manager(db, true, model);
  managers.pop();
  abandoned.push(first);
  await first.start();
  return pidsOf(first);
}

describe('adoption of recorded engines at start', { timeout: 120_000 }, () => {
  it('adopts the running engines of the record (same pids), and names none in doubt', async () => {
    const db = openStore();
    const before = await crashed(db);
    const second = manager(db, true);
    await second.start();
    expect(pidsOf(second)).toEqual(before);
    expect(second.memoryInDoubt()).toEqual([]);
    const kinds = new EventLog(db).list({ kind: 'replica.adopted', limit: 10 }).map((e) => e.subject);
    expect(kinds.sort()).toEqual(Object.keys(before).sort());
    // Adopted engines serve and sleep like launched ones; stopping the manager stops them.
    await second.drain({ policy: 'abort', deadlineMs: 0 });
    expect(second.snapshot().models.policy?.replicas.every((r) => r.memory_released)).toBe(true);
    await second.shutdown();
    // (They are this test process's children: gone once it has reaped them.)
    await waitFor(() => !Object.values(before).flat().some(alive), 5_000, 'adopted engines stopped');
  });

  it('an adopted engine reports its SGLang release as a launched one does, and what the release cannot do is refused', async () => {
    const db = openStore();
    const model = { ...POLICY, sglang_version: '0.5.2' };
    const before = await crashed(db, model);
    const second = manager(db, true, model);
    await second.start();
    expect(pidsOf(second)).toEqual(before);
    const replicas = second.snapshot().models.policy?.replicas ?? [];
    expect(replicas.map((r) => r.sglang_version)).toEqual(['0.5.2', '0.5.2']);
    const engines = second.registry.snapshot().models.policy?.engines ?? [];
    expect(engines.map((e) => e.sglang_version)).toEqual(['0.5.2', '0.5.2']);
    const adopted = new EventLog(db).list({ kind: 'replica.adopted', limit: 10 });
    expect(adopted.map((e) => e.data.sglang_version)).toEqual(['0.5.2', '0.5.2']);
    // 0.5.2's pause takes no mode (it aborts): a retract drain is refused before any replica is touched.
    const refusal = await second.drain({ policy: 'retract', deadlineMs: 0 }).catch((e: unknown) => e);
    expect(refusal).toMatchObject({ code: 'sglang_feature_unsupported' });
    expect((refusal as Error).message).toContain(
      'runs SGLang 0.5.2, which cannot pause generation in mode retract',
    );
    expect(second.snapshot().models.policy?.replicas.map((r) => r.state)).toEqual(['ready', 'ready']);
  });

  it('without adoption, or for a changed model, stops the recorded engines and launches new ones', async () => {
    const db = openStore();
    const before = await crashed(db);
    const off = manager(db, false);
    await off.start();
    await waitFor(() => !Object.values(before).flat().some(alive), 5_000, 'recorded engines stopped');
    const fresh = pidsOf(off);
    expect(Object.values(fresh).flat()).not.toContain(Object.values(before).flat()[0]);
    // The record now holds the new set; a plan whose model moved to another path adopts none of it.
    // Left running, as a crash leaves it: its engines are the record the next manager finds.
    managers.splice(managers.indexOf(off), 1);
    abandoned.push(off);
    const moved = manager(db, true, { ...POLICY, model_path: '/models/policy-v2' });
    await moved.start();
    await waitFor(() => !Object.values(fresh).flat().some(alive), 5_000, 'engines of the old model stopped');
    const events = new EventLog(db).list({ kind: 'replica.not_adopted', limit: 10 });
    expect(events.at(-1)?.data).toMatchObject({ why: expect.stringContaining('/models/policy-v2') });
  });

  it.each(['releasing', 'resuming'])(
    'an engine recorded mid-call (%s) is not adopted: stopped and relaunched fully resident, in no doubt',
    async (memory) => {
      const db = openStore();
      const before = await crashed(db);
      // As if the control plane died after sending release_memory_occupation (or resume) and before its answer:
      // SGLang cannot say what the engine holds, and a second call of the same kind would kill it.
      const records = new EngineRecords(db, 'rollout', systemClock);
      const [first, other] = records.list();
      db.prepare('UPDATE engines SET memory = ? WHERE engine_id = ?').run(memory, first?.engine_id);
      const second = manager(db, true);
      await second.start();
      expect(second.memoryInDoubt()).toEqual([]);
      const after = pidsOf(second);
      await waitFor(
        () => !(before[first?.engine_id ?? ''] ?? []).some(alive),
        5_000,
        'the old engine stopped',
      );
      expect(after[first?.engine_id ?? '']).not.toEqual(before[first?.engine_id ?? '']);
      // The other engine's record was settled: adopted as it was.
      expect(after[other?.engine_id ?? '']).toEqual(before[other?.engine_id ?? '']);
      const notAdopted = new EventLog(db).list({ kind: 'replica.not_adopted', limit: 10 });
      expect(notAdopted.map((e) => [e.subject, e.data.why])).toEqual([
        [
          first?.engine_id,
          `${memory} when the previous control plane stopped: SGLang cannot report its memory, so it is relaunched to a known state`,
        ],
      ]);
      expect(second.eligibleEngines('policy')).toHaveLength(2);
      expect(records.list().map((r) => r.memory)).toEqual(['resident', 'resident']);
    },
  );

  it('an engine the memory plan left partly released is adopted holding its kept tags: onload resumes only the rest', async () => {
    const db = openStore();
    const first = manager(db, true);
    managers.pop();
    abandoned.push(first);
    await first.start();
    // A drain by the memory plan: the weights and CUDA graphs stay, the KV cache goes. Then the control plane dies.
    await first.drain({ policy: 'abort', deadlineMs: 0, keep: { policy: ['weights', 'cuda_graph'] } });
    const before = pidsOf(first);
    const records = new EngineRecords(db, 'rollout', systemClock);
    expect(records.list().map((r) => [r.memory, r.resident_tags])).toEqual([
      ['released', ['weights', 'cuda_graph']],
      ['released', ['weights', 'cuda_graph']],
    ]);
    const second = manager(db, true);
    await second.start();
    expect(pidsOf(second)).toEqual(before);
    expect(second.snapshot().models.policy?.replicas.map((r) => r.state)).toEqual(['sleeping', 'sleeping']);
    // Resuming the weights or CUDA graphs it holds would kill the engine (SGLang's offload_tags.remove raises,
    // and so does the simulator): the onload asks for the KV cache only, and the same engines serve.
    await second.activate();
    expect(second.eligibleEngines('policy')).toHaveLength(2);
    expect(pidsOf(second)).toEqual(before);
    expect(Object.values(before).flat().every(alive)).toBe(true);
    expect(records.list().map((r) => [r.memory, r.resident_tags])).toEqual([
      ['resident', ['weights', 'kv_cache', 'cuda_graph']],
      ['resident', ['weights', 'kv_cache', 'cuda_graph']],
    ]);
  });

  it('stops the recorded engines of a role the config no longer has (no manager would look at them)', async () => {
    const db = openStore();
    const before = Object.values(await crashed(db)).flat();
    expect(before.every(alive)).toBe(true);
    // A config with the rollout role: nothing of it is touched.
    expect(await stopEnginesOfRemovedRoles(db, ['rollout'], systemClock, silentLogger)).toEqual([]);
    expect(before.every(alive)).toBe(true);
    // A config without it: its engines are stopped and forgotten.
    expect(await stopEnginesOfRemovedRoles(db, ['genrm'], systemClock, silentLogger)).toEqual([]);
    await waitFor(() => !before.some(alive), 5_000, 'engines of the removed role stopped');
    expect(EngineRecords.roles(db)).toEqual([]);
  });
});
