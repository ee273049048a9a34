import { UisError } from '@uis/spec';
import { forceStopAdopted } from './adopted-replica.ts';
import { FileLogRing } from './engine-log-file.ts';
import type { LaunchedReplica, ProcessExit } from './launched-replica.ts';
import { LogRing } from './log-ring.ts';
import { spawnPiped, spawnToFile } from './node-process.ts';
import type { ServerArgsResult } from './server-args.ts';
import { EngineWatchdog } from './watchdog.ts';

export { LogRing } from './log-ring.ts';

/** What a launcher starts: the processes of one replica (from `buildServerArgs`) and its engine id. */
export interface LaunchSpec extends ServerArgsResult {
  engineId: string;
}

export type { LaunchedReplica, ProcessExit } from './launched-replica.ts';

export interface EngineLauncher {
  launch(spec: LaunchSpec): Promise<LaunchedReplica>;
}

export interface LocalLauncherOptions {
  /** Lines kept per replica for `logTail`. Default 2000. */
  logLines?: number;
  /** Receives every log line as it arrives (e.g. a pino logger). */
  onLog?: (engineId: string, nodeRank: number, line: string) => void;
  /** Give each node process a watchdog that stops it when this process dies, SIGKILL included (default true).
   * Off only where engines are meant to outlive the control plane (kept for adoption by the next one): such
   * engines are not killed by this process's exit either, only by `stop()` (or the shutdown deadline), and their
   * output goes to log files in `logDir` (a pipe to this process would break when it dies). */
  watchdog?: boolean;
  /** Log directory of engines launched without a watchdog. Default `$TMPDIR/uis-engines`. */
  logDir?: string;
}

const DEFAULT_GRACE_MS = 10_000;

function isGone(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ESRCH') throw e;
  }
}

/** Process groups still running, with the engine each belongs to. Detached groups outlive their parent, so when
 * this process exits they are killed synchronously (except groups kept for adoption: launched without a
 * watchdog); a death that runs no exit handler (SIGKILL, OOM killer) is the watchdogs' job. */
const liveGroups = new Map<number, string>();
const keptOnExit = new Set<number>();
let exitHookInstalled = false;

/** SIGKILLs every engine process group this process launched and has not stopped yet, and every adopted engine
 * not stopped yet (the shutdown deadline's last resort), and names them: `engine-id (pgid N)`. */
export function forceStopEngines(): string[] {
  const stopped: string[] = forceStopAdopted();
  for (const [pgid, engineId] of liveGroups) {
    if (isGone(pgid)) continue;
    signalGroup(pgid, 'SIGKILL');
    stopped.push(`${engineId} (pgid ${pgid})`);
  }
  return stopped;
}

function track(pgid: number, engineId: string, keepOnExit: boolean): void {
  liveGroups.set(pgid, engineId);
  if (keepOnExit) keptOnExit.add(pgid);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const g of liveGroups.keys()) {
      if (keptOnExit.has(g)) continue;
      try {
        process.kill(-g, 'SIGKILL');
      } catch {
        // Already gone (or not ours any more): nothing to clean.
      }
    }
  });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Waits until the process group has no member left, polling; false when `ms` passed first. */
async function waitGroupGone(pgid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (isGone(pgid)) return true;
    await sleep(25);
  }
  return isGone(pgid);
}

interface NodeChild {
  nodeRank: number;
  pid: number;
  exited: Promise<void>;
  watchdog: EngineWatchdog | undefined;
}

class LocalReplica implements LaunchedReplica {
  private readonly exitCallbacks: Array<(e: ProcessExit) => void> = [];
  private readonly pending: ProcessExit[] = [];
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly children: NodeChild[],
    private readonly ring: LogRing,
  ) {}

  pids(): number[] {
    return this.children.map((c) => c.pid);
  }

  onExit(cb: (e: ProcessExit) => void): void {
    this.exitCallbacks.push(cb);
    // An exit that happened before anyone listened (e.g. a crash during start) is still reported.
    for (const e of this.pending) cb(e);
  }

  reportExit(e: ProcessExit): void {
    if (this.stopping) return;
    this.ring.push(`[node ${e.nodeRank}] exited code=${e.code} signal=${e.signal}`);
    if (this.exitCallbacks.length === 0) this.pending.push(e);
    for (const cb of this.exitCallbacks) cb(e);
  }

  logTail(lines = 100): string {
    return this.ring.tail(lines);
  }

  stop(graceMs = DEFAULT_GRACE_MS): Promise<void> {
    this.stopping ??= this.terminate(graceMs);
    return this.stopping;
  }

  private async terminate(graceMs: number): Promise<void> {
    // Each node process leads its own group (detached), so one signal reaches everything it spawned.
    for (const c of this.children) signalGroup(c.pid, 'SIGTERM');
    const gone = await Promise.all(this.children.map((c) => waitGroupGone(c.pid, graceMs)));
    this.children.forEach((c, i) => {
      if (!gone[i]) signalGroup(c.pid, 'SIGKILL');
    });
    await Promise.all(this.children.map((c) => waitGroupGone(c.pid, 10_000)));
    await Promise.all(this.children.map((c) => c.exited));
    for (const c of this.children) {
      liveGroups.delete(c.pid);
      keptOnExit.delete(c.pid);
      c.watchdog?.release();
    }
  }
}

/** Starts the processes of a replica on this host: one detached process group per node, logs captured. */
export class LocalProcessLauncher implements EngineLauncher {
  constructor(private readonly opts: LocalLauncherOptions = {}) {}

  async launch(spec: LaunchSpec): Promise<LaunchedReplica> {
    const keep = this.opts.watchdog === false;
    const ring = keep
      ? new FileLogRing(this.opts.logDir, this.opts.logLines)
      : new LogRing(this.opts.logLines);
    const children: NodeChild[] = [];
    let replica: LocalReplica | undefined;
    const exits: ProcessExit[] = [];
    for (const p of spec.processes) {
      const [file, ...args] = p.argv;
      if (file === undefined) {
        throw new UisError({
          code: 'invalid_launch_spec',
          path: `processes[${p.nodeRank}].argv`,
          message: `${spec.engineId}: empty argv`,
        });
      }
      const proc = { file, args, env: p.env, cwd: p.cwd };
      const child =
        ring instanceof FileLogRing
          ? spawnToFile(proc, ring.open(spec.engineId, p.nodeRank))
          : spawnPiped(proc, (line) => {
              ring.push(`[node ${p.nodeRank}] ${line}`);
              this.opts.onLog?.(spec.engineId, p.nodeRank, line);
            });
      const exited = child.ended.then((r) => {
        const e: ProcessExit = { nodeRank: p.nodeRank, code: r.code, signal: r.signal };
        if (r.startError !== undefined) ring.push(`[node ${p.nodeRank}] failed to start: ${r.startError}`);
        if (replica) replica.reportExit(e);
        else exits.push(e);
      });
      if (child.pid === undefined) {
        await exited;
        const started = new LocalReplica(children, ring);
        await started.stop(0);
        throw new UisError({
          code: 'launch_failed',
          path: `processes[${p.nodeRank}].argv[0]`,
          message: `${spec.engineId}: cannot start "${file}" on node rank ${p.nodeRank}\n${ring.tail(20)}`,
        });
      }
      track(child.pid, spec.engineId, keep);
      const watchdog = keep ? undefined : new EngineWatchdog(child.pid);
      children.push({ nodeRank: p.nodeRank, pid: child.pid, exited, watchdog });
    }
    replica = new LocalReplica(children, ring);
    for (const e of exits) replica.reportExit(e);
    return replica;
  }
}
