/** The real SGLang router (`python3 -m sglang_router.launch_router`) as a bench column, in front of the same
 * engines as the other columns. */
import { execFileSync } from 'node:child_process';
import { type CpuTimes, freePort, type Proc, start, treeCpuTimes } from './procs.ts';

export function findRouter(): { python: string } | { missing: string } {
  try {
    execFileSync('python3', ['-c', 'import sglang_router'], { stdio: 'pipe' });
    return { python: 'python3' };
  } catch {
    return { missing: 'python3 cannot import sglang_router (pip install -r requirements-ci.txt)' };
  }
}

/** Starts the router with the engines as workers and waits until every one is a healthy worker. Round robin
 * (the cheapest policy, as our gateway's), log level warn (no per-request log lines, as our gateway). */
export async function startRouter(
  python: string,
  engines: string[],
  /** Wraps the command (e.g. `nice -n N`), as the bench does for every proxy. */
  wrap: (cmd: [string, string[]]) => [string, string[]] = (c) => c,
): Promise<{ url: string; proc: Proc; cpu(): CpuTimes }> {
  const port = await freePort();
  const metrics = await freePort();
  const argv = [
    '-m',
    'sglang_router.launch_router',
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--policy',
    'round_robin',
    '--prometheus-host',
    '127.0.0.1',
    '--prometheus-port',
    String(metrics),
    '--log-level',
    'warn',
    '--worker-urls',
    ...engines,
  ];
  const proc = start('sglang-router', ...wrap([python, argv]));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const r = await fetch(`${url}/workers`);
      const body = (await r.json()) as { workers?: Array<{ is_healthy?: boolean }> };
      const healthy = (body.workers ?? []).filter((w) => w.is_healthy).length;
      if (healthy === engines.length) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || proc.child.exitCode !== null)
      throw new Error(`sglang-router did not get ready: ${proc.stderr.join('').slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  // The router is one multi-threaded process: /proc/<pid>/stat counts every thread.
  return { url, proc, cpu: () => treeCpuTimes(proc.pid) };
}
