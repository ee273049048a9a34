import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fingerprint, type Lease, openStore } from '@uis/manager';
import { deferConfig } from '@uis/manager/testing';
import { parseConfig, UisError } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { commandNamed } from './commands/index.ts';
import { runCommand } from './commands/run-command.ts';
import { afterRestart, createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';

const tmp = mkdtempSync(join(tmpdir(), 'uis-op-restart-'));
const launchers: InProcessSimLauncher[] = [];
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
  rmSync(tmp, { recursive: true, force: true });
});

function start(dbPath: string) {
  const launcher = new InProcessSimLauncher({ simOnloadMs: 5, simOffloadMs: 5 });
  launchers.push(launcher);
  return createControlPlane({ config: parseConfig(deferConfig()), dbPath, launcher });
}

describe('retrying the id of an operation a crash cut', { timeout: 60_000 }, () => {
  it('says the service recovered by itself when no lease is blocked (no "resolve the lease")', async () => {
    const db = join(tmp, 'cut.db');
    await (await start(db)).stop();
    // What a process killed during `drain rollout` (operation id drain-1) leaves behind: a running row.
    const store = openStore(db);
    const request = { command: 'drain', params: { role: 'rollout' }, input: {} };
    store
      .prepare("INSERT INTO operations (id, fingerprint, status, created_at) VALUES (?, ?, 'running', ?)")
      .run('drain-1', fingerprint(request), Date.now());
    store.close();
    const plane = await start(db);
    try {
      expect(plane.coordinator.leases().every((l) => l.status === 'held')).toBe(true);
      const cmd = commandNamed('drain');
      if (!cmd) throw new Error('no drain command');
      const retried = runCommand(plane, cmd, {
        params: { role: 'rollout' },
        input: {},
        actor: 'ops',
        operationId: 'drain-1',
        inputRoot: 'body',
        paramsRoot: '',
        fallbackSubject: 'drain',
      });
      const err = await retried.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(UisError);
      expect(err).toMatchObject({ code: 'operation_interrupted', status: 409 });
      const message = (err as UisError).message;
      expect(message).toContain('no activation lease is blocked');
      expect(message).toContain('list_replicas');
      expect(message).not.toMatch(/resolve/);
    } finally {
      await plane.stop();
    }
  });

  it('names the blocked lease to resolve when one is', () => {
    const lease = (group: string, status: Lease['status'], reason: string | null) =>
      ({ group, status, reason }) as Lease;
    expect(afterRestart({ leases: () => [lease('actor', 'held', null)] })).not.toMatch(/resolve/);
    expect(
      afterRestart({
        leases: () => [
          lease('actor', 'blocked', 'engine rollout/0 cannot be identified'),
          lease('b', 'held', null),
        ],
      }),
    ).toBe(
      'the activation lease of group actor is blocked (engine rollout/0 cannot be identified): resolve it (resolve_lease), then retry with a new id',
    );
  });
});
