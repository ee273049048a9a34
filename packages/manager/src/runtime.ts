import type { Logger } from '@uis/spec';

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
