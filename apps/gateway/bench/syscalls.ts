/**
 * Syscalls per request of a proxy process under load: `strace -f -c` attached to the process (every thread) and its
 * direct children (nginx's workers) for the length of one load window. strace slows the traced process several
 * times, so its rate under strace means nothing; the calls per request are what it is for (a slower process
 * batches a little more per wakeup, so epoll_wait per request reads low).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childPids } from './procs.ts';

export function findStrace(): { bin: string } | { missing: string } {
  const r = spawnSync('strace', ['-V'], { encoding: 'utf8' });
  return r.status === 0
    ? { bin: 'strace' }
    : { missing: 'strace is not installed (apt-get install -y strace)' };
}

export interface SyscallCounts {
  /** Calls by syscall name over the window. */
  calls: Record<string, number>;
  total: number;
}

/** strace -c's summary table: `% time seconds usecs/call calls [errors] syscall`, then a `total` line. */
export function parseStraceSummary(text: string): SyscallCounts {
  const calls: Record<string, number> = {};
  let total = 0;
  for (const line of text.split('\n')) {
    const t = line.trim().split(/\s+/);
    if (t.length < 5 || !/^[\d.]+$/.test(t[0]!)) continue;
    const name = t[t.length - 1]!;
    const n = Number(t[3]);
    if (name === 'total') total = n;
    else calls[name] = n;
  }
  return { calls, total };
}

const traced = (pid: number): boolean => {
  try {
    return /TracerPid:\s+[1-9]/.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
};

/** Counts the syscalls of `pid` and its children while `load` runs; `load` resolves to the requests it made. */
export async function syscallsDuring(
  pid: number,
  load: () => Promise<number>,
): Promise<SyscallCounts & { requests: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'uis-bench-strace-'));
  const out = join(dir, 'summary.txt');
  const pids = [pid, ...childPids(pid)];
  const child = spawn('strace', ['-f', '-c', '-q', '-o', out, ...pids.flatMap((p) => ['-p', String(p)])], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    // The load starts once every process is attached (its TracerPid set), so the whole window is counted.
    const deadline = Date.now() + 10_000;
    while (!pids.every(traced)) {
      if (child.exitCode !== null || Date.now() > deadline)
        throw new Error(`strace did not attach to ${pids.join(', ')}: ${stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const requests = await load();
    child.kill('SIGINT');
    await exited;
    return { ...parseStraceSummary(readFileSync(out, 'utf8')), requests };
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}
