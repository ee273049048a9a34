import type { Logger } from '@uis/spec';

/** What I/O code takes instead of touching globals, so tests control time and output. The clock and the logger are
 * spec's: one time source and one log interface for engines, managers and the coordinator. */
export { type Clock, type Logger, settlesWithin, silentLogger, systemClock } from '@uis/spec';

/** Records log lines in memory: tests assert that refusals are logged. */
export class MemoryLogger implements Logger {
  readonly lines: Array<{
    level: 'debug' | 'info' | 'warn' | 'error';
    obj: object;
    msg: string | undefined;
  }> = [];
  debug(obj: object, msg?: string): void {
    this.lines.push({ level: 'debug', obj, msg });
  }
  info(obj: object, msg?: string): void {
    this.lines.push({ level: 'info', obj, msg });
  }
  warn(obj: object, msg?: string): void {
    this.lines.push({ level: 'warn', obj, msg });
  }
  error(obj: object, msg?: string): void {
    this.lines.push({ level: 'error', obj, msg });
  }
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
