/** What I/O code takes instead of touching globals, so tests control time and output. The clock is the engine
 * package's: one time source for engines, managers and the coordinator. */
export { type Clock, settlesWithin, systemClock } from '@uis/sglang-engine';

/** The subset of pino's API the manager uses; pino loggers satisfy it. */
export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

/** Records log lines in memory: tests assert that refusals are logged. */
export class MemoryLogger implements Logger {
  readonly lines: Array<{ level: 'info' | 'warn' | 'error'; obj: object; msg: string | undefined }> = [];
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
