/** Child processes for the bench: each in its own process group, stopped as a group, CPU read from /proc. */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';

export interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  stderr: string[];
}

const running = new Set<Proc>();

export function start(name: string, cmd: string, args: string[], cwd?: string): Proc {
  const child = spawn(cmd, args, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`${name}: could not start ${cmd}`);
  const proc: Proc = { name, child, pid: child.pid, stderr: [] };
  child.stderr?.on('data', (c: Buffer) => {
    proc.stderr.push(c.toString());
    if (proc.stderr.length > 50) proc.stderr.shift();
  });
  running.add(proc);
  child.on('exit', () => running.delete(proc));
  return proc;
}

/** The first stdout line that parses as JSON (the child's "ready" report). */
export function firstJsonLine<T>(proc: Proc, timeoutMs = 60_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: proc.child.stdout! });
    const timer = setTimeout(
      () => reject(new Error(`${proc.name}: no report in ${timeoutMs} ms`)),
      timeoutMs,
    );
    rl.on('line', (line) => {
      try {
        const v = JSON.parse(line) as T;
        clearTimeout(timer);
        rl.close();
        resolve(v);
      } catch {
        // not the report line
      }
    });
    proc.child.on('exit', (code) => {
      clearTimeout(timer);
      reject(
        new Error(`${proc.name} exited (${code}) before reporting: ${proc.stderr.join('').slice(-2000)}`),
      );
    });
  });
}

/** Every JSON line the child prints, until it exits. */
export function jsonLines(proc: Proc, onLine: (v: unknown) => void): Promise<number | null> {
  const rl = createInterface({ input: proc.child.stdout! });
  rl.on('line', (line) => {
    try {
      onLine(JSON.parse(line));
    } catch {
      // a log line
    }
  });
  return new Promise((resolve) => proc.child.on('exit', (code) => resolve(code)));
}

export async function stop(proc: Proc): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.child.once('exit', () => resolve()));
  try {
    process.kill(-proc.pid, 'SIGTERM');
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-proc.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }, 15_000);
  await exited;
  clearTimeout(timer);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...running].map(stop));
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

const TICKS_PER_S = 100;

export interface CpuTimes {
  userMs: number;
  systemMs: number;
  /** Minor page faults (kernel time that is no syscall: fresh pages the heap touches). */
  minorFaults: number;
}

/** User and system CPU time (ms) of a process and its direct children, from /proc (utime, stime). */
export function treeCpuTimes(pid: number): CpuTimes {
  const t = cpuTimes(pid);
  for (const child of childPids(pid)) {
    const c = cpuTimes(child);
    t.userMs += c.userMs;
    t.systemMs += c.systemMs;
    t.minorFaults += c.minorFaults;
  }
  return t;
}

/** The direct children of a process (nginx's workers), from /proc. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat !== undefined && Number(stat[1]) === pid) out.push(Number(entry));
  }
  return out;
}

function readStat(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the `(comm)` part, which may contain spaces: state ppid ... utime(14) stime(15).
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

function cpuTimes(pid: number): CpuTimes {
  const f = readStat(pid);
  if (f === undefined) return { userMs: 0, systemMs: 0, minorFaults: 0 };
  return {
    userMs: (Number(f[11]) * 1000) / TICKS_PER_S,
    systemMs: (Number(f[12]) * 1000) / TICKS_PER_S,
    minorFaults: Number(f[7]),
  };
}

export async function waitHttpOk(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const r = await fetch(url);
      await r.arrayBuffer();
      if (r.ok) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
