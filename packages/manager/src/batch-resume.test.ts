import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SGLangClient } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import type { SimServer } from '@uis/sglang-sim';
import { isUisError } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchRunner } from './batch-runner.ts';
import { BatchStore } from './batch-store.ts';
import { judgementScore } from './score-parsers.ts';
import { openStore } from './store.ts';
import { expectedGenrmOutputs, startModelSim } from './testing.ts';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const CHILD = fileURLToPath(new URL('./batch-child.fixture.ts', import.meta.url));

const samples = Array.from({ length: 16 }, (_, i) => ({
  sample_id: `s${i}`,
  input: {
    messages: [{ role: 'user' as const, content: `Judge answer ${i}: the quick dog runs north` }],
    sampling_params: { max_new_tokens: 48, ignore_eos: true },
  },
}));

let slow: SimServer;
let reference: SimServer;
let dir: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'uis-batch-'));
  // ~5 ms per decoded token: one sample takes a few hundred ms, so the kill lands mid-batch.
  slow = await startModelSim('judge', { simDecodeUsPerToken: 5000 });
  reference = await startModelSim('judge');
});

afterAll(async () => {
  if (child?.pid && child.exitCode === null) child.kill('SIGKILL');
  await slow?.close();
  await reference?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('durable deferred batch: kill the runner process mid-batch, resume from SQLite', () => {
  it('resumes with the staged results, scores only the rest, commits exactly once', async () => {
    const dbPath = join(dir, 'manager.db');
    const store = new BatchStore(openStore(dbPath));
    const b = store.create({ kind: 'genrm_score', model: 'judge', id: 'batch-1' });
    store.addSamples(b.id, { samples });
    store.seal(b.id);

    child = spawn(process.execPath, ['--import', 'tsx', CHILD, dbPath, slow.url, b.id], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child?.on('exit', (_c, sig) => resolve(sig)),
    );
    await waitFor(
      () => {
        if (child?.exitCode !== null) throw new Error(`child exited early: ${stderr}`);
        return store.get(b.id).results >= 4;
      },
      60_000,
      'four results committed by the child',
    );
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    const staged = store.get(b.id);
    expect(staged.state).toBe('running');
    expect(staged.results).toBeGreaterThanOrEqual(4);
    expect(staged.results).toBeLessThan(samples.length);
    expect(store.samples(b.id).every((s) => s.output === null)).toBe(true);

    // "Restart": a fresh connection to the same file, explicit recovery, then the run resumes.
    const restarted = new BatchStore(openStore(dbPath));
    expect(restarted.recover('resume')).toEqual([{ id: b.id, action: 'resumed' }]);
    const client = new SGLangClient(reference.url);
    const runner = new BatchRunner({
      store: restarted,
      targets: () => [{ engineId: 'judge/0', servedModelName: 'judge', client }],
      concurrency: 4,
      scoreParser: judgementScore,
    });
    const report = await runner.run(b.id);
    expect(report.reused).toBe(staged.results);
    expect(report.scored).toBe(samples.length - staged.results);
    expect(report.batch.state).toBe('committed');
    expect(report.batch.attempts).toBe(2);

    const want = await expectedGenrmOutputs(reference.url, samples, judgementScore);
    await client.close();
    expect(restarted.samples(b.id).map((s) => s.output)).toEqual(want);
    // Never committed twice.
    try {
      restarted.commit(b.id);
      expect.unreachable();
    } catch (e) {
      expect(isUisError(e) && e.code).toBe('batch_already_committed');
    }
  });
});
