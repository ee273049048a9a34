import { join } from 'node:path';
import { alive, waitFor } from '@uis/sglang-engine/testing';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { adminReplicas, writeAdoptingRolloutConfig } from '../testing/chaos-configs.ts';
import { chaosScratch, listening, spawnUis, taggedPids } from '../testing/uis-process.ts';

// Chaos: a second `uis` on the database another one holds. It exits 2 naming the holder before it touches anything
// (adoption included); a holder that died (kill -9) or hangs past the heartbeat bound is taken over; a hung holder
// that wakes up finds it lost the database and exits without touching the engines.
const { dir: tmp, tags, stopped } = chaosScratch('writer');

const TOKEN = 'chaos-writer-token';
const db = join(tmp, 'uis.db');
const config = writeAdoptingRolloutConfig(join(tmp, 'writer.yaml'), { token: TOKEN, gpus: 2, db });

async function enginePids(url: string): Promise<number[]> {
  return (await adminReplicas(url, TOKEN)).flatMap((r) => r.pids).sort();
}

async function chat(url: string): Promise<number> {
  const r = await fetch(`${url}/rollout/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'policy', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  });
  await r.arrayBuffer();
  return r.status;
}

/** The holder row as the test reads it (read-only, beside the running uis). */
function holderRow(): { pid: number; port: number | null; heartbeat_at: number } | undefined {
  const d = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return d.prepare('SELECT pid, port, heartbeat_at FROM db_holder WHERE id = 1').get() as
      | { pid: number; port: number | null; heartbeat_at: number }
      | undefined;
  } finally {
    d.close();
  }
}

function serve(env: Record<string, string> = {}) {
  const p = spawnUis(['serve', '--config', config, '--port', '0'], env);
  tags.push(p.tag);
  return p;
}

describe('chaos: one writer per database', { timeout: 240_000 }, () => {
  it('a second uis exits 2 naming the live holder and touches nothing; a dead or hung holder is taken over', async () => {
    const first = serve();
    const url1 = await listening(first);
    const pids1 = await enginePids(url1);
    expect(pids1).toHaveLength(2);
    const port1 = Number(new URL(url1).port);
    expect(holderRow()).toMatchObject({ pid: first.child.pid, port: port1 });

    // 1. The first is alive: the second is refused before it adopts or launches anything.
    const second = serve();
    expect(await second.exited).toBe(2);
    expect(second.errors()).toContain('[database_in_use]');
    expect(second.errors()).toContain(`uis pid ${first.child.pid}`);
    expect(second.errors()).toContain(`port ${port1}`);
    expect(second.errors()).toContain(db);
    expect(taggedPids(second.tag)).toEqual([]);
    expect(await enginePids(url1)).toEqual(pids1);
    expect(await chat(url1)).toBe(200);

    // 2. The holder dies (kill -9): its pid is gone, so the next start takes over at once and adopts its engines.
    process.kill(first.child.pid as number, 'SIGKILL');
    await first.exited;
    const third = serve({ UIS_LOG_LEVEL: 'warn' });
    const url3 = await listening(third);
    expect(third.errors()).toContain(`pid ${first.child.pid} is gone`);
    expect(await enginePids(url3)).toEqual(pids1);
    expect(holderRow()?.pid).toBe(third.child.pid);

    // 3. The holder hangs (SIGSTOP): refused while its heartbeat is fresh, taken over once it is older than the
    //    bound (3 s here), and the hung one exits without touching the engines when it wakes up.
    process.kill(third.child.pid as number, 'SIGSTOP');
    stopped.push(third.child.pid as number);
    await waitFor(
      () => Date.now() - (holderRow()?.heartbeat_at ?? Date.now()) > 3500,
      30_000,
      'the hung holder heartbeat ages past the bound',
    );
    const fourth = serve({ UIS_DB_STALE_MS: '3000' });
    const url4 = await listening(fourth);
    expect(fourth.errors()).toMatch(/heartbeat is \d+ s old/);
    expect(await enginePids(url4)).toEqual(pids1);
    process.kill(third.child.pid as number, 'SIGCONT');
    expect(await third.exited).toBe(1);
    expect(third.errors()).toContain(`uis pid ${fourth.child.pid}`);
    expect(third.errors()).toContain('took the database over');
    expect(pids1.every(alive)).toBe(true);
    expect(await chat(url4)).toBe(200);
    expect(holderRow()?.pid).toBe(fourth.child.pid);

    // A clean stop gives the database up: the row is gone and the next start needs no takeover.
    fourth.child.kill('SIGTERM');
    expect(await fourth.exited).toBe(0);
    expect(holderRow()).toBeUndefined();
  });
});
