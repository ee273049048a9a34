import { SGLangClient } from '@uis/sglang-engine';
import type { SimServer } from '@uis/sglang-sim';
import { isUisError, UisError } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchRunner } from './batch-runner.ts';
import { BatchStore } from './batch-store.ts';
import { EventLog } from './event-log.ts';
import { LifecycleCoordinator, type PhaseParticipant } from './lifecycle-coordinator.ts';
import { judgementScore } from './score-parsers.ts';
import { openStore } from './store.ts';
import { outcomeCode, startModelSim } from './testing.ts';

const stopping = () => new UisError({ code: 'service_stopping', message: 'the service is stopping' });

let slow: SimServer;
beforeAll(async () => {
  // ~5 ms per decoded token: a sample takes a few hundred ms, so a stop lands mid-batch.
  slow = await startModelSim('judge', { simDecodeUsPerToken: 5000 });
});
afterAll(async () => {
  await slow?.close();
});

function sealedBatch(store: BatchStore, n: number) {
  const b = store.create({ kind: 'genrm_score', model: 'judge' });
  store.addSamples(b.id, {
    samples: Array.from({ length: n }, (_, i) => ({
      sample_id: `s${i}`,
      input: {
        messages: [{ role: 'user' as const, content: `Judge answer ${i}` }],
        sampling_params: { max_new_tokens: 48, ignore_eos: true },
      },
    })),
  });
  store.seal(b.id);
  return b.id;
}

function runnerOn(store: BatchStore) {
  const client = new SGLangClient(slow.url);
  return new BatchRunner({
    store,
    concurrency: 2,
    scoreParser: judgementScore,
    targets: () => [{ engineId: 'judge/0', servedModelName: 'judge', client }],
  });
}

const until = async (done: () => boolean) => {
  const end = Date.now() + 30_000;
  while (!done() && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
};

describe('a stopping service interrupts batch runs', { timeout: 60_000 }, () => {
  it('puts the batch back with the stop as its reason, keeps what was scored, and throws service_stopping', async () => {
    const store = new BatchStore(openStore());
    const id = sealedBatch(store, 8);
    const stop = new AbortController();
    const run = runnerOn(store).run(id, stop.signal);
    await until(() => store.get(id).results >= 1);
    stop.abort(stopping());
    const err = await run.catch((e: unknown) => e);
    expect(isUisError(err) && err.code).toBe('service_stopping');
    const after = store.get(id);
    expect(after).toMatchObject({ state: 'sealed', reason: 'run interrupted: the service is stopping' });
    expect(after.results).toBeGreaterThanOrEqual(1);
    expect(after.results).toBeLessThan(8);

    // The next run scores only the rest and commits.
    const report = await runnerOn(store).run(id);
    expect(report.reused).toBe(after.results);
    expect(store.get(id).state).toBe('committed');
  });

  it('a run asked for after the stop scores nothing and leaves the batch sealed', async () => {
    const store = new BatchStore(openStore());
    const id = sealedBatch(store, 2);
    const stop = new AbortController();
    stop.abort(stopping());
    expect(await outcomeCode(runnerOn(store).run(id, stop.signal))).toBe('service_stopping');
    expect(store.get(id)).toMatchObject({ state: 'sealed', results: 0 });
  });

  it("the coordinator's interrupt aborts the phase work of the running transition with the stop's reason", async () => {
    const db = openStore();
    const role = (name: string): PhaseParticipant & { role: string } => ({
      role: name,
      drain: async () => ({
        memoryReleased: true,
        engines: [{ engine_id: `${name}/0`, memory_released: true, state: 'sleeping' }],
      }),
      activate: async () => {},
    });
    const coordinator = new LifecycleCoordinator({
      groups: [
        {
          name: 'actor',
          pool: 'actor',
          phases: [
            { name: 'rollout', residents: ['rollout'] },
            { name: 'genrm_score', residents: ['genrm'] },
          ],
        },
      ],
      participants: [role('rollout'), role('genrm')],
      db,
      events: new EventLog(db),
    });
    await coordinator.initialize();
    let seen: unknown;
    let started = false;
    coordinator.registerPhaseTask('genrm_score', ({ signal }) => {
      started = true;
      return new Promise((_, reject) =>
        signal.addEventListener('abort', () => {
          seen = signal.reason;
          reject(signal.reason);
        }),
      );
    });
    const transition = coordinator.transition({ to: 'genrm_score' });
    await until(() => started);
    coordinator.interrupt();
    expect(await outcomeCode(transition)).toBe('service_stopping');
    expect(isUisError(seen) && seen.code).toBe('service_stopping');
  });
});
