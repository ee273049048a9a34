import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { UisError } from '@uis/spec';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { type LaunchedReplica, LocalProcessLauncher, LogRing, type ProcessExit } from './launcher.ts';
import { alive, waitUntil } from './sim-harness.ts';

const REPO = fileURLToPath(new URL('../../..', import.meta.url));

/** A node process that prints its env and argv, starts a grandchild (like SGLang's scheduler subprocesses) and
 * prints the grandchild's pid, then idles. */
const PARENT = `
const { spawn } = require('node:child_process');
console.log('argv=' + JSON.stringify(process.argv.slice(1)));
console.log('cvd=' + process.env.CUDA_VISIBLE_DEVICES);
console.error('to stderr');
const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
console.log('grandchild=' + g.pid);
if (process.argv[1] === 'ignore-term') process.on('SIGTERM', () => console.log('ignoring SIGTERM'));
if (process.argv[1] === 'crash') setTimeout(() => process.exit(3), 200);
setInterval(() => {}, 1000);
`;

const started: LaunchedReplica[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((r) => r.stop(500)));
});

async function launch(modes: string[]): Promise<LaunchedReplica> {
  const launcher = new LocalProcessLauncher();
  const replica = await launcher.launch({
    engineId: 'm/0',
    headUrl: 'http://127.0.0.1:1',
    processes: modes.map((mode, rank) => ({
      nodeRank: rank,
      node: `n${rank}`,
      argv: [process.execPath, '-e', PARENT, mode],
      env: { CUDA_VISIBLE_DEVICES: String(rank) },
    })),
  });
  started.push(replica);
  return replica;
}

function grandchildren(r: LaunchedReplica): number[] {
  return [...r.logTail(1000).matchAll(/grandchild=(\d+)/g)].map((m) => Number(m[1]));
}

// Each test starts node processes (and their grandchildren), which a loaded 2-core machine can take seconds to
// spawn; the 5 s default would cut short their 30 s waits.
describe('LocalProcessLauncher', { timeout: 30_000 }, () => {
  it('starts one process per node with its env, captures stdout and stderr, kills the whole group on stop', async () => {
    const r = await launch(['run', 'run']);
    expect(r.pids()).toHaveLength(2);
    await waitUntil(() => grandchildren(r).length === 2);
    const tail = r.logTail(1000);
    expect(tail).toContain('[node 0] cvd=0');
    expect(tail).toContain('[node 1] cvd=1');
    expect(tail).toContain('[node 1] to stderr');
    expect(tail).toContain('[node 0] argv=["run"]');
    const all = [...r.pids(), ...grandchildren(r)];
    expect(all.every(alive)).toBe(true);
    const exits: ProcessExit[] = [];
    r.onExit((e) => exits.push(e));
    await r.stop(5000);
    expect(all.filter(alive)).toEqual([]);
    // A requested stop is not an unexpected exit.
    expect(exits).toEqual([]);
    await r.stop();
  });

  it('escalates to SIGKILL after the grace period', async () => {
    const r = await launch(['ignore-term']);
    await waitUntil(() => grandchildren(r).length === 1 && r.logTail().includes('grandchild='));
    const all = [...r.pids(), ...grandchildren(r)];
    await r.stop(300);
    expect(all.filter(alive)).toEqual([]);
  });

  it('reports an unexpected exit with its code, even before a listener is attached', async () => {
    const r = await launch(['crash']);
    await waitUntil(() => r.logTail().includes('exited code=3'));
    const exits: ProcessExit[] = [];
    r.onExit((e) => exits.push(e));
    expect(exits).toEqual([{ nodeRank: 0, code: 3, signal: null }]);
    const orphans = grandchildren(r);
    await r.stop(2000);
    // The crashed node's grandchild shared its process group and is gone too.
    expect(orphans.filter(alive)).toEqual([]);
  });

  it('fails with launch_failed and the reason when the command does not exist', async () => {
    const launcher = new LocalProcessLauncher();
    const err = await launcher
      .launch({
        engineId: 'm/0',
        headUrl: 'http://127.0.0.1:1',
        processes: [{ nodeRank: 0, node: 'n0', argv: ['/nonexistent/sglang-binary'], env: {} }],
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UisError);
    expect((err as UisError).code).toBe('launch_failed');
    expect((err as UisError).message).toContain('/nonexistent/sglang-binary');
  });
});

describe('process exit', () => {
  it('kills the launched groups when the launching process exits without stopping them', async () => {
    const fixture = fileURLToPath(new URL('./launcher-exit.fixture.ts', import.meta.url));
    const { stdout } = await execa(process.execPath, ['--import', 'tsx', fixture], { cwd: REPO });
    const pid = Number(/pid=(\d+)/.exec(stdout)?.[1]);
    expect(pid).toBeGreaterThan(0);
    await waitUntil(() => !alive(pid));
  }, 60_000);

  it('kills the launched groups within 5 s when the launching process is SIGKILLed (the watchdog)', async () => {
    const fixture = fileURLToPath(new URL('./launcher-exit.fixture.ts', import.meta.url));
    const run = await execa(process.execPath, ['--import', 'tsx', fixture, 'kill-9'], {
      cwd: REPO,
      reject: false,
    });
    expect(run.signal).toBe('SIGKILL');
    const pid = Number(/pid=(\d+)/.exec(run.stdout)?.[1]);
    expect(pid).toBeGreaterThan(0);
    await waitUntil(() => !alive(pid), 5000);
  }, 60_000);

  it('a replica stopped normally releases its watchdog (nothing left that could signal a reused group id)', async () => {
    const r = await launch(['run']);
    const pgid = r.pids()[0]!;
    const watchdogs = () => watchdogsOf(pgid);
    expect(watchdogs()).toHaveLength(1);
    await r.stop(500);
    await waitUntil(() => watchdogs().length === 0, 5000);
  });

  it('launches no watchdog when engines are meant to outlive this process (watchdog: false)', async () => {
    const replica = await new LocalProcessLauncher({ watchdog: false }).launch({
      engineId: 'kept/0',
      headUrl: 'http://127.0.0.1:1',
      processes: [
        { nodeRank: 0, node: 'n0', argv: [process.execPath, '-e', 'setInterval(() => {}, 1000)'], env: {} },
      ],
    });
    started.push(replica);
    expect(watchdogsOf(replica.pids()[0]!)).toEqual([]);
  });
});

/** Live watchdog processes (`sh -c ... uis-engine-watchdog <pgid> ...`) guarding `pgid`. */
function watchdogsOf(pgid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0');
      if (argv.includes('uis-engine-watchdog') && argv.includes(String(pgid))) out.push(Number(name));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

describe('LogRing', () => {
  it('keeps only the last lines', () => {
    const ring = new LogRing(3);
    for (let i = 0; i < 10; i++) ring.push(`l${i}`);
    expect(ring.tail(10)).toBe('l7\nl8\nl9');
    expect(ring.tail(2)).toBe('l8\nl9');
  });
});
