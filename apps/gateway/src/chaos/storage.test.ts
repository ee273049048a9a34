import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, statfsSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '@uis/sglang-engine/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { chaosScratch, listening, spawnUis } from '../testing/uis-process.ts';

// Chaos: the database on a read-only file system, and on a disk that fills up while uis runs. Both use small tmpfs
// mounts this file makes (root, or CAP_SYS_ADMIN); where none can be made the tests are skipped with the reason.
const { dir: tmp, tags } = chaosScratch('storage');
const mounts: string[] = [];
afterAll(() => {
  for (const m of mounts.reverse()) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      // not mounted any more
    }
  }
});

function mountTmpfs(name: string, options: string): string {
  const dir = join(tmp, name);
  mkdirSync(dir);
  execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'uis-chaos', dir], { stdio: 'pipe' });
  mounts.push(dir);
  return dir;
}

/** Why this machine cannot make the mounts, or null when it can (tried once, for real). */
function cannotMount(): string | null {
  try {
    const probe = mountTmpfs('probe', 'size=64k');
    execFileSync('umount', [probe], { stdio: 'ignore' });
    mounts.pop();
    return null;
  } catch (e) {
    return `cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`;
  }
}
const skip = cannotMount();
if (skip) console.log(`[chaos storage] skipping the read-only and full-disk tests: ${skip}`);

const TOKEN = 'chaos-storage-token';

function writeConfig(name: string, dbPath: string): string {
  const file = join(tmp, `${name}.yaml`);
  writeFileSync(
    file,
    [
      'cluster: { nodes: [{ name: node-0, gpus: 2 }] }',
      `gateway: { admin_token: ${TOKEN}, launcher: sim, db_path: ${dbPath} }`,
      'roles:',
      '  rollout:',
      '    deployment: { mode: decoupled }',
      '    models:',
      '      - { name: policy, model_path: /models/p, weight_source: disk, engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }] }',
      '  genrm:',
      '    deployment: { mode: decoupled }',
      '    models:',
      '      - { name: judge, model_path: /models/j, weight_source: static, engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }] }',
    ].join('\n'),
  );
  return file;
}

const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/** Submits a genrm batch of `n` samples, each `pad` characters long; returns the status and the error body. */
async function submit(url: string, n: number, pad: number, key: string) {
  const samples = Array.from({ length: n }, (_, i) => ({
    sample_id: `s${i}`,
    input: { messages: [{ role: 'user', content: `${'x'.repeat(pad)} Judgement:` }] },
  }));
  const r = await fetch(`${url}/admin/batches`, {
    method: 'POST',
    headers: { ...auth, 'idempotency-key': key },
    body: JSON.stringify({ kind: 'genrm_score', samples }),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

async function batchState(url: string, id: string): Promise<string> {
  const r = await fetch(`${url}/admin/batches/${id}`, { headers: auth });
  return ((await r.json()) as { result: { batch: { state: string } } }).result.batch.state;
}

/** Fills the file system of `dir` to the last byte; returns the filler's path. */
function fill(dir: string): string {
  const path = join(dir, 'filler');
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  }
  // The last partial chunk: byte by byte to the end.
  try {
    for (;;) writeSync(fd, chunk, 0, 1);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    closeSync(fd);
  }
  return path;
}

describe.skipIf(skip !== null)('chaos: storage errors are clear and survivable', { timeout: 180_000 }, () => {
  it('a read-only path exits 2 naming the path and "read-only file system", for a new and an existing database', async () => {
    const ro = mountTmpfs('ro', 'ro,size=1m');
    const fresh = join(ro, 'uis.db');
    const refused = spawnUis(['serve', '--config', writeConfig('ro', fresh), '--port', '0']);
    tags.push(refused.tag);
    expect(await refused.exited).toBe(2);
    expect(refused.errors()).toContain(`directory ${ro} cannot be written: read-only file system`);
    expect(refused.errors()).toContain('[invalid_db_path]');

    // A database that exists, on a file system remounted read-only.
    const rw = mountTmpfs('was-rw', 'size=1m');
    const existing = join(rw, 'uis.db');
    writeFileSync(existing, '');
    execFileSync('mount', ['-o', 'remount,ro', rw]);
    const again = spawnUis([
      'serve',
      '--db',
      existing,
      '--config',
      writeConfig('was-rw', existing),
      '--port',
      '0',
    ]);
    tags.push(again.tag);
    expect(await again.exited).toBe(2);
    expect(again.errors()).toContain(`--db: ${existing} cannot be written: read-only file system`);
  });

  it('a full disk answers 507 storage_full naming the file, logged once, keeps accepted work and recovers by itself', async () => {
    const small = mountTmpfs('small', 'size=16m');
    const dbPath = join(small, 'uis.db');
    const uis = spawnUis(['serve', '--config', writeConfig('full', dbPath), '--port', '0'], {
      UIS_LOG_LEVEL: 'info',
    });
    tags.push(uis.tag);
    const url = await listening(uis);
    const accepted = await submit(url, 4, 10, 'before-full');
    expect(accepted.status).toBe(200);
    const acceptedId = (accepted.body.result as { id: string }).id;

    const filler = fill(small);
    expect(statfsSync(small).bavail).toBe(0);
    // Three refusals in one burst: each answered 507 naming the file, one log line for the burst.
    for (let i = 0; i < 3; i++) {
      const refused = await submit(url, 200, 2000, `while-full-${i}`);
      expect(refused.status, JSON.stringify(refused.body)).toBe(507);
      expect(refused.body).toMatchObject({ error: { code: 'storage_full', details: { db: dbPath } } });
      expect(JSON.stringify(refused.body)).toContain(dbPath);
    }
    const fullLines = () =>
      uis
        .errors()
        .split('\n')
        .filter((l) => l.includes('is full: writes are refused'));
    await waitFor(() => fullLines().length > 0, 10_000, 'the full disk logged');
    expect(fullLines()[0]).toContain(dbPath);
    // Reads and serving go on; the batch accepted before the disk filled is still there.
    expect(['sealed', 'running', 'committed']).toContain(await batchState(url, acceptedId));
    const chat = await fetch(`${url}/rollout/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'policy', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    expect(chat.status).toBe(200);
    await chat.arrayBuffer();

    // Space returns: the next call succeeds without a restart, the log says so once, and both batches commit.
    rmSync(filler);
    const after = await submit(url, 50, 2000, 'after-full');
    expect(after.status, JSON.stringify(after.body)).toBe(200);
    await waitFor(
      () => uis.errors().includes('the database accepts writes again'),
      10_000,
      'recovery logged',
    );
    // One line for the whole burst of refusals.
    expect(fullLines()).toHaveLength(1);
    const afterId = (after.body.result as { id: string }).id;
    for (const id of [acceptedId, afterId])
      await waitFor(async () => (await batchState(url, id)) === 'committed', 60_000, `batch ${id} commits`);
    uis.child.kill('SIGTERM');
    expect(await uis.exited).toBe(0);
  });
});
