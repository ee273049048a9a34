import { spawn } from 'node:child_process';
import { closeSync } from 'node:fs';
import { execa } from 'execa';

/** How a node process ended; `startError` when it never ran (e.g. the program does not exist). */
export interface NodeProcessEnd {
  code: number | null;
  signal: string | null;
  startError?: string;
}

export interface SpawnedNodeProcess {
  pid: number | undefined;
  ended: Promise<NodeProcessEnd>;
}

export interface NodeProcessSpec {
  file: string;
  args: string[];
  env: Record<string, string> | undefined;
  cwd: string | undefined;
}

/** Starts one node process of an engine in its own process group, stdin ignored, its output split into lines
 * for `onLine` (through pipes to this process). */
export function spawnPiped(spec: NodeProcessSpec, onLine: (line: string) => void): SpawnedNodeProcess {
  const child = execa(spec.file, spec.args, {
    env: spec.env,
    extendEnv: true,
    cwd: spec.cwd,
    detached: true,
    reject: false,
    buffer: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    forceKillAfterDelay: false,
  });
  for (const stream of [child.stdout, child.stderr]) {
    let partial = '';
    stream?.setEncoding('utf8');
    stream?.on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      for (const line of parts) onLine(line);
    });
    stream?.on('end', () => {
      if (partial !== '') onLine(partial);
      partial = '';
    });
  }
  const ended = child.then((r) => ({
    code: r.exitCode ?? null,
    signal: r.signal ?? null,
    ...(r.failed && r.exitCode === undefined && r.signal === undefined ? { startError: r.shortMessage } : {}),
  }));
  return { pid: child.pid, ended };
}

/** Starts one node process of an engine in its own process group, stdin ignored, its output appended to the
 * open file `fd` (closed here once the child holds its copy): nothing of it depends on this process staying
 * alive. */
export function spawnToFile(spec: NodeProcessSpec, fd: number): SpawnedNodeProcess {
  const child = spawn(spec.file, spec.args, {
    env: { ...process.env, ...spec.env },
    cwd: spec.cwd,
    detached: true,
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  const ended = new Promise<NodeProcessEnd>((resolve) => {
    child.once('error', (e) => resolve({ code: null, signal: null, startError: e.message }));
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  // Not waiting for it: an engine kept for adoption must not hold this process's event loop open.
  child.unref();
  return { pid: child.pid, ended };
}
