import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ControlPlane, createControlPlane, InProcessSimLauncher, submitBatch } from '@uis/control-plane';
import { afterAll, describe, expect, it } from 'vitest';
import { UisServer } from '../server/uis-server.ts';
import { deferTestConfig, splitTestConfig } from '../testing/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'uis-control-plane-'));
const launchers: InProcessSimLauncher[] = [];
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
  rmSync(dir, { recursive: true, force: true });
});

function service(dbPath: string) {
  const launcher = new InProcessSimLauncher({ simOnloadMs: 5, simOffloadMs: 5 });
  launchers.push(launcher);
  return createControlPlane({ config: deferTestConfig(), launcher, dbPath });
}

const states = (s: ControlPlane, role: 'rollout' | 'genrm' | 'teacher') =>
  Object.values(s.managers.get(role)!.snapshot().models).flatMap((m) => m.replicas.map((r) => r.state));

describe('ControlPlane across a restart (SQLite file)', { timeout: 60_000 }, () => {
  it('keeps the phase, the batches and the operation results; engines come back in the recorded phase', async () => {
    const db = join(dir, 'uis.db');
    const first = await service(db);
    const batch = submitBatch(first, 'genrm_score', null, [
      { sample_id: 's0', input: { messages: [{ role: 'user', content: 'Judgement:' }] } },
    ]);
    const server = new UisServer({ plane: first, adminToken: 'restart-token' });
    const { url } = await server.listen(0);
    const advance = () =>
      fetch(`${url}/admin/phases/advance`, {
        method: 'POST',
        headers: { authorization: 'Bearer restart-token', 'idempotency-key': 'adv-restart' },
        body: JSON.stringify({ group: 'actor' }),
      }).then(async (r) => ({ status: r.status, body: await r.text() }));
    const before = await advance();
    expect(before.status).toBe(200);
    expect(first.coordinator.lease('actor').phase).toBe('train');
    await server.close();
    await first.stop();

    const second = await service(db);
    try {
      expect(second.coordinator.lease('actor')).toMatchObject({ phase: 'train', status: 'held' });
      // Every engine started resident; the recorded phase (train) holds none of them.
      expect(states(second, 'rollout')).toEqual(['sleeping', 'sleeping']);
      expect(states(second, 'genrm')).toEqual(['sleeping', 'sleeping']);
      expect(states(second, 'teacher')).toEqual(['sleeping']);
      expect(second.store.get(batch.id).state).toBe('committed');
      expect(second.store.samples(batch.id)[0]?.output).toMatchObject({ score: expect.any(Number) });
      const again = new UisServer({ plane: second, adminToken: 'restart-token' });
      const { url: url2 } = await again.listen(0);
      const replay = await fetch(`${url2}/admin/phases/advance`, {
        method: 'POST',
        headers: { authorization: 'Bearer restart-token', 'idempotency-key': 'adv-restart' },
        body: JSON.stringify({ group: 'actor' }),
      }).then(async (r) => ({ status: r.status, body: await r.text() }));
      await again.close();
      // The retry after the restart gets the first answer; the phase did not move again.
      expect(replay).toEqual(before);
      expect(second.coordinator.lease('actor').phase).toBe('train');
    } finally {
      await second.stop();
    }
  });
});

describe('ControlPlane: batches of a role without a defer schedule', { timeout: 90_000 }, () => {
  it('runs a batch again once its scorer is back, instead of leaving it queued until a restart', async () => {
    const launcher = new InProcessSimLauncher({ simOnloadMs: 5, simOffloadMs: 5 });
    launchers.push(launcher);
    const s = await createControlPlane({ config: splitTestConfig(), launcher });
    try {
      const genrm = s.managers.get('genrm')!;
      await genrm.deactivate();
      const batch = submitBatch(s, 'genrm_score', null, [
        { sample_id: 's0', input: { messages: [{ role: 'user', content: 'Judgement:' }] } },
      ]);
      // Generous: the reruns back off 1 s doubling, and a loaded machine slows the reactivation in between.
      const until = (done: () => boolean) =>
        new Promise<void>((resolve) => {
          const end = Date.now() + 45_000;
          const poll = () => (done() || Date.now() > end ? resolve() : setTimeout(poll, 25));
          poll();
        });
      // No replica: the run puts the batch back with the reason.
      await until(() => s.store.get(batch.id).reason !== null);
      expect(s.store.get(batch.id)).toMatchObject({
        state: 'sealed',
        reason: expect.stringContaining('no eligible'),
      });
      await genrm.activate();
      // Wait for an end state: the rerun passes through 'running' on its way.
      await until(() => ['committed', 'failed'].includes(s.store.get(batch.id).state));
      expect(s.store.get(batch.id).state).toBe('committed');
      expect(s.store.samples(batch.id)[0]?.output).toMatchObject({ score: expect.any(Number) });
    } finally {
      await s.stop();
    }
  });
});
