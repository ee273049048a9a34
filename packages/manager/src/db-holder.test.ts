import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@uis/sglang-engine/testing';
import { isUisError } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { DatabaseHolder } from './db-holder.ts';
import { MemoryLogger } from './runtime.ts';
import { StorageHealth } from './storage-health.ts';
import { openStore } from './store.ts';

const dir = mkdtempSync(join(tmpdir(), 'uis-holder-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function refusal(f: () => void): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  return null;
}

describe('DatabaseHolder: one writer per database file', () => {
  it('refuses a second holder while the first beats, takes over past the bound, and tells the first it lost', async () => {
    const path = join(dir, 'a.db');
    const clock = new ManualClock(1_000_000);
    const lost: string[] = [];
    const first = new DatabaseHolder(openStore(path), path, { clock, onLost: (by) => lost.push(by) });
    first.claim();
    first.listening(4321);
    const second = new DatabaseHolder(openStore(path), path, { clock, logger: new MemoryLogger() });
    const refused = refusal(() => second.claim());
    expect(isUisError(refused) && refused.code).toBe('database_in_use');
    expect((refused as Error).message).toContain(`uis pid ${process.pid}`);
    expect((refused as Error).message).toContain('port 4321');

    // The first keeps beating: still refused 29 s later.
    await clock.advance(29_000);
    first.heartbeat();
    await clock.advance(29_000);
    expect(isUisError(refusal(() => second.claim()))).toBe(true);
    // Silent for more than the bound (30 s): the pid still runs (this one), yet the holder is gone.
    await clock.advance(1_001);
    expect(refusal(() => second.claim())).toBeNull();
    expect(lost).toEqual([]);
    first.heartbeat();
    expect(lost).toEqual([`uis pid ${process.pid} on ${hostname()}`]);
    second.release();
    first.release();
  });

  it('a clean release frees the database at once; a row whose pid is gone is taken over at once', () => {
    const path = join(dir, 'b.db');
    const db = openStore(path);
    const a = new DatabaseHolder(db, path);
    a.claim();
    a.release();
    const b = new DatabaseHolder(openStore(path), path);
    b.claim();
    // A holder that died without releasing: its row names a pid that no longer runs.
    db.prepare('UPDATE db_holder SET pid = 2147483646').run();
    const logger = new MemoryLogger();
    const c = new DatabaseHolder(openStore(path), path, { logger });
    c.claim();
    expect(logger.lines.map((l) => (l.obj as { why?: string }).why)).toEqual(['pid 2147483646 is gone']);
    c.release();
    b.release();
  });
});

describe('StorageHealth', () => {
  it('turns a refused write into storage_full naming the file, logged once per burst', () => {
    const logger = new MemoryLogger();
    const health = new StorageHealth('/data/uis.db', logger);
    const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const first = health.translate(full);
    const second = health.translate(full);
    for (const e of [first, second]) {
      expect(isUisError(e) && e.code).toBe('storage_full');
      expect(isUisError(e) && e.status).toBe(507);
      expect((e as Error).message).toContain('/data/uis.db');
    }
    expect(isUisError(health.translate({ code: 'SQLITE_READONLY_DBMOVED' })) && 'ok').toBe('ok');
    expect(health.translate(new Error('other'))).toBeInstanceOf(Error);
    expect(logger.lines.filter((l) => l.level === 'error')).toHaveLength(1);
    health.wrote();
    health.wrote();
    expect(logger.lines.filter((l) => l.level === 'info')).toHaveLength(1);
    expect(logger.lines.at(-1)?.obj).toMatchObject({ refused: 3 });
    health.translate(full);
    expect(logger.lines.filter((l) => l.level === 'error')).toHaveLength(2);
  });
});
