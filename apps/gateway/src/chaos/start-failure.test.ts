import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chaosScratch, spawnUis, taggedPids, within } from '../testing/uis-process.ts';

// Chaos: `uis serve --launcher local` where one engine fails at once and the others never become healthy (the
// mix that used to leave uis alive, not listening, until the 600 s start deadline).
const { dir: tmp, tags } = chaosScratch('start');

// A `python` first on PATH: the engine on GPU 0 exits 1 after a moment, every other one hangs without listening.
const python = join(tmp, 'python');
writeFileSync(
  python,
  [
    '#!/bin/sh',
    'case " $* " in',
    '  *" --base-gpu-id 0 "*) echo "CUDA error: out of memory" >&2; sleep 0.3; exit 1 ;;',
    'esac',
    'exec sleep 600',
  ].join('\n'),
);
chmodSync(python, 0o755);
const config = join(tmp, 'four.yaml');
writeFileSync(
  config,
  [
    'cluster: { nodes: [{ name: node-0, gpus: 4 }] }',
    'gateway: { launcher: local }',
    'roles:',
    '  rollout:',
    '    deployment: { mode: decoupled }',
    '    models:',
    '      - { name: policy, model_path: /models/p, weight_source: disk, engine_groups: [{ num_gpus: 4, gpus_per_engine: 1 }] }',
  ].join('\n'),
);

const RUNS = 20;
const PARALLEL = 4;

describe('chaos: a failed start', { timeout: 600_000 }, () => {
  it(`exits by itself with the failure code and leaves no engine, ${RUNS} of ${RUNS} runs`, async () => {
    const outcomes: Array<{ code: number | null; ms: number; left: number; stderr: string }> = [];
    const one = async () => {
      const t0 = Date.now();
      const uis = spawnUis(['serve', '--config', config, '--port', '0'], {
        PATH: `${tmp}:${process.env.PATH ?? ''}`,
      });
      tags.push(uis.tag);
      const timer = setTimeout(() => uis.child.kill('SIGKILL'), 60_000);
      const code = await uis.exited;
      clearTimeout(timer);
      const ms = Date.now() - t0;
      // The engines were stopped before uis exited; give the kernel a moment to reap what it killed.
      await within(2000, () => taggedPids(uis.tag).length === 0, 'no engine left').catch(() => undefined);
      outcomes.push({ code, ms, left: taggedPids(uis.tag).length, stderr: uis.errors() });
    };
    for (let i = 0; i < RUNS; i += PARALLEL) await Promise.all(Array.from({ length: PARALLEL }, one));
    const slowest = Math.max(...outcomes.map((o) => o.ms));
    console.log(
      `chaos: ${RUNS} failed starts, exit codes ${[...new Set(outcomes.map((o) => o.code))]}, slowest ${slowest} ms`,
    );
    for (const o of outcomes) {
      expect(o.code, o.stderr).toBe(2);
      expect(o.stderr).toContain('start_failed');
      expect(o.stderr).toContain('out of memory');
      expect(o.left).toBe(0);
    }
    expect(outcomes).toHaveLength(RUNS);
  });
});

// Every engine hangs without listening: the start would wait for its deadline (600 s) without the cancel.
const hanging = join(tmp, 'hanging');
mkdirSync(hanging);
writeFileSync(join(hanging, 'python'), ['#!/bin/sh', 'exec sleep 600'].join('\n'));
chmodSync(join(hanging, 'python'), 0o755);

describe('chaos: SIGTERM during the start', { timeout: 120_000 }, () => {
  it('cancels the start: the engines launched so far are stopped and uis exits 0 promptly', async () => {
    const uis = spawnUis(['serve', '--config', config, '--port', '0'], {
      PATH: `${hanging}:${process.env.PATH ?? ''}`,
    });
    tags.push(uis.tag);
    // Four engines launched (and uis itself): the start is waiting for them to answer.
    await within(
      30_000,
      () => taggedPids(uis.tag, [uis.child.pid ?? 0]).length >= 4,
      'four engines launched',
    );
    const t0 = Date.now();
    uis.child.kill('SIGTERM');
    const timer = setTimeout(() => uis.child.kill('SIGKILL'), 30_000);
    const code = await uis.exited;
    clearTimeout(timer);
    const ms = Date.now() - t0;
    await within(2000, () => taggedPids(uis.tag).length === 0, 'no engine left').catch(() => undefined);
    console.log(`chaos: SIGTERM during the start, exit ${code} after ${ms} ms`);
    expect(code, uis.errors()).toBe(0);
    expect(uis.output()).toContain('SIGTERM: stopping');
    expect(uis.errors()).not.toContain('start_failed');
    expect(taggedPids(uis.tag)).toEqual([]);
  });
});
