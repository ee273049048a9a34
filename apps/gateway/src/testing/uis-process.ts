import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@uis/sglang-engine/testing';
import { afterAll } from 'vitest';

/** The `uis` CLI and the repository root, for tests that run the real command as a process. */
export const REPO_ROOT = join(import.meta.dirname, '..', '..', '..', '..');
export const UIS_BIN = join(REPO_ROOT, 'apps', 'gateway', 'bin', 'uis.mjs');

/** A `uis` process a test started; `tag` marks every process it starts (engines inherit the environment). */
export interface UisProcess {
  child: ChildProcess;
  tag: string;
  output(): string;
  errors(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

/** Starts `uis <args>` with `UIS_CHAOS_TAG` set to a fresh tag; `stop` kills it (SIGKILL) when still running. */
export function spawnUis(args: string[], env: Record<string, string> = {}): UisProcess {
  const tag = randomBytes(8).toString('hex');
  const child = spawn(process.execPath, [UIS_BIN, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, UIS_LOG_LEVEL: 'warn', ...env, UIS_CHAOS_TAG: tag },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, tag, output: () => out, errors: () => err, exited };
}

/** Waits for the console URL `uis serve`/`uis demo` prints once it listens. */
export async function listening(p: UisProcess, ms = 90_000): Promise<string> {
  return waitFor(
    () => {
      if (p.child.exitCode !== null) throw new Error(`uis exited (${p.child.exitCode})`);
      return /console\s+(http:\/\/[^\s]+)\//.exec(p.output())?.[1];
    },
    ms,
    'the console URL uis prints once it listens',
  ).catch((e: unknown) => {
    throw new Error(`${e instanceof Error ? e.message : String(e)}:\n${p.output()}\n${p.errors()}`);
  });
}

/** Every live process on this host whose environment carries `UIS_CHAOS_TAG=tag` (the `uis` process itself and
 * everything it started that kept its environment), except `exclude`. */
export function taggedPids(tag: string, exclude: readonly number[] = []): number[] {
  const needle = `UIS_CHAOS_TAG=${tag}\0`;
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (exclude.includes(pid)) continue;
    try {
      const environ = readFileSync(`/proc/${name}/environ`, 'latin1');
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      // A zombie (state Z) is dead already, waiting for its parent to read its status.
      if (environ.includes(needle) && !/^\d+ \(.*\) Z/s.test(stat)) out.push(pid);
    } catch {
      // Exited while we looked, or not ours to read.
    }
  }
  return out;
}

/** Waits for `cond`; resolves with the ms it took, rejects after `ms`. */
export async function within(ms: number, cond: () => boolean, what: string): Promise<number> {
  const t0 = Date.now();
  await waitFor(cond, ms, what);
  return Date.now() - t0;
}

/** SIGKILLs every process carrying `tag` (a test's cleanup after a failure). */
export function killTagged(tag: string): void {
  for (const pid of taggedPids(tag)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** A chaos test file's scratch: a temporary directory, the tags of the `uis` processes it started (push each
 * one) and the pids it stopped with SIGSTOP (push each). After the file's tests the stopped processes are let go
 * again, every tagged process is killed and the directory removed. */
export function chaosScratch(name: string): { dir: string; tags: string[]; stopped: number[] } {
  const dir = mkdtempSync(join(tmpdir(), `uis-chaos-${name}-`));
  const tags: string[] = [];
  const stopped: number[] = [];
  afterAll(() => {
    for (const pid of stopped) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // gone
      }
    }
    for (const t of tags) killTagged(t);
    rmSync(dir, { recursive: true, force: true });
  });
  return { dir, tags, stopped };
}
