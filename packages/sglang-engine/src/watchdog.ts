import { type ChildProcess, spawn } from 'node:child_process';
import type { Socket } from 'node:net';

/**
 * The watchdog's whole program (POSIX sh). It blocks reading its stdin, a pipe whose only writer is the control
 * plane: when the control plane dies (SIGKILL included, which runs no exit handler) the kernel closes the pipe,
 * `read` returns, and the engine's process group gets SIGTERM, then SIGKILL once `$2` tenths of a second passed.
 * The word `release` ends it without touching the group (a normal stop, or an engine handed over to a later
 * control plane). dash's `kill` takes no `--`: a negative pid is the group. Terminal signals are ignored: Ctrl-C stops the control plane, whose shutdown stops the engine.
 */
const SCRIPT = `trap '' INT HUP TERM QUIT
read -r word
[ "$word" = release ] && exit 0
kill -TERM "-$1" 2>/dev/null || exit 0
i=0
while [ "$i" -lt "$2" ] && kill -0 "-$1" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
kill -KILL "-$1" 2>/dev/null
exit 0`;

/** Tenths of a second the engine gets between SIGTERM and SIGKILL once its control plane is gone: the whole
 * stop stays well inside 5 s. */
const DEFAULT_GRACE_TENTHS = 30;

/** One engine process group's watchdog: a `/bin/sh` (about 1 MB) in its own process group. */
export class EngineWatchdog {
  readonly pid: number | undefined;
  private readonly child: ChildProcess;
  private released = false;

  constructor(pgid: number, graceTenths = DEFAULT_GRACE_TENTHS) {
    this.child = spawn('/bin/sh', ['-c', SCRIPT, 'uis-engine-watchdog', String(pgid), String(graceTenths)], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    });
    this.pid = this.child.pid;
    // Neither the watchdog nor our end of its pipe may keep the control plane's event loop alive.
    this.child.unref();
    const stdin = this.child.stdin as Socket | null;
    stdin?.unref();
    // A watchdog that is gone (killed by hand) makes the pipe fail: nothing to do about it here.
    stdin?.on('error', () => undefined);
    this.child.on('error', () => undefined);
  }

  /** Ends the watchdog without stopping the engine (it was stopped already, or is handed over). Idempotent. */
  release(): void {
    if (this.released) return;
    this.released = true;
    const stdin = this.child.stdin;
    if (stdin && !stdin.destroyed) stdin.end('release\n');
  }
}
