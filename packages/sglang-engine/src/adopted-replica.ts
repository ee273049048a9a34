import { readFileSync } from 'node:fs';
import type { LaunchedReplica, ProcessExit } from './launched-replica.ts';

/** One node process of an engine as a control plane recorded it: its pid (the leader of its own process group)
 * and the kernel's start time of that pid, which tells a reused pid from the engine. */
export interface RecordedProcess {
  pid: number;
  /** Field 22 of `/proc/<pid>/stat` (clock ticks after boot); null where there is no `/proc`. */
  startTime: string | null;
}

/** The start time of a live process (`/proc/<pid>/stat` field 22), or null when it is gone or there is no
 * `/proc` (not Linux). A zombie counts as gone. */
export function processStartTime(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (rest[0] === 'Z' || rest[0] === 'X') return null;
  return rest[19] ?? null;
}

/** What a recorded process is now: `same` (the pid runs and started when recorded), `gone` (no such process, or
 * the pid belongs to a later process), `unverifiable` (the pid runs but nothing tells whether it is the engine:
 * no start time was recorded or none can be read). */
export type ProcessIdentity = 'same' | 'gone' | 'unverifiable';

export function identifyProcess(p: RecordedProcess): ProcessIdentity {
  const now = processStartTime(p.pid);
  if (now !== null) return p.startTime === null ? 'unverifiable' : now === p.startTime ? 'same' : 'gone';
  try {
    process.kill(p.pid, 0);
  } catch (e) {
    // EPERM: it runs under another user, so it is not an engine this control plane started.
    return (e as NodeJS.ErrnoException).code === 'ESRCH' ? 'gone' : 'unverifiable';
  }
  // Alive, but /proc cannot say since when (no /proc, or a zombie /proc already reports as gone).
  return p.startTime === null ? 'unverifiable' : 'gone';
}

/** Records the processes of a launched replica with their start times. */
export function recordProcesses(pids: readonly number[]): RecordedProcess[] {
  return pids.map((pid) => ({ pid, startTime: processStartTime(pid) }));
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function signalVerified(p: RecordedProcess, signal: NodeJS.Signals): void {
  // Checked right before each signal: a pid that now belongs to another process is never signalled.
  if (identifyProcess(p) !== 'same') return;
  try {
    process.kill(-p.pid, signal);
  } catch {
    // Not a group leader any more, or gone meanwhile: signal the process itself, which the check just verified.
    try {
      process.kill(p.pid, signal);
    } catch {
      // gone
    }
  }
}

/** Stops recorded processes that are verifiably the engine's (SIGTERM to their group, SIGKILL after `graceMs`)
 * and waits until they are gone. Resolves with the processes left running that could not be verified (never
 * signalled); an empty list means nothing of the engine runs any more. */
export async function stopRecordedProcesses(
  procs: readonly RecordedProcess[],
  graceMs = 5_000,
): Promise<RecordedProcess[]> {
  const unverifiable = procs.filter((p) => identifyProcess(p) === 'unverifiable');
  const ours = procs.filter((p) => identifyProcess(p) === 'same');
  for (const p of ours) signalVerified(p, 'SIGTERM');
  const until = Date.now() + graceMs;
  while (Date.now() < until && ours.some((p) => identifyProcess(p) === 'same')) await sleep(25);
  for (const p of ours) signalVerified(p, 'SIGKILL');
  const killUntil = Date.now() + 10_000;
  while (Date.now() < killUntil && ours.some((p) => identifyProcess(p) === 'same')) await sleep(25);
  return [...unverifiable, ...ours.filter((p) => identifyProcess(p) === 'same')];
}

/** Adopted engines not stopped yet: the shutdown deadline's last resort kills them too. */
const liveAdopted = new Set<AdoptedReplica>();

/** SIGKILLs every adopted engine not stopped yet (only processes still verified to be it) and names them. */
export function forceStopAdopted(): string[] {
  return [...liveAdopted].flatMap((r) => r.kill());
}

/**
 * The processes of an engine a previous control plane launched and this one adopted. They are not this process's
 * children: there is no exit event (the health checks notice a death) and no log. `stop()` signals only processes
 * still verified to be the engine's.
 */
export class AdoptedReplica implements LaunchedReplica {
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly procs: readonly RecordedProcess[],
    readonly engineId = 'adopted engine',
  ) {
    liveAdopted.add(this);
  }

  /** SIGKILLs the processes still verified to be this engine's; names them (`forceStopEngines`). */
  kill(): string[] {
    const killed = this.procs.filter((p) => identifyProcess(p) === 'same');
    for (const p of killed) signalVerified(p, 'SIGKILL');
    return killed.map((p) => `${this.engineId} (pid ${p.pid}, adopted)`);
  }

  pids(): number[] {
    return this.procs.map((p) => p.pid);
  }

  onExit(_cb: (e: ProcessExit) => void): void {
    // Not our children: their exit is not observable here. Health checks declare a dead engine dead.
  }

  logTail(): string {
    return '';
  }

  stop(graceMs = 10_000): Promise<void> {
    this.stopping ??= stopRecordedProcesses(this.procs, graceMs).then(() => {
      liveAdopted.delete(this);
    });
    return this.stopping;
  }
}
