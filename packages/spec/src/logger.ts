/** What uis code logs through, in the engine, the manager, the control plane, the gateway and the demo driver:
 * the subset of pino's API they use (pino loggers satisfy it; tests pass a recording one). */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  /** pino's: lets a per-request debug line skip building its fields when debug is off. */
  isLevelEnabled?(level: string): boolean;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
