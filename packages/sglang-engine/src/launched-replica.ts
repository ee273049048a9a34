/** How a node process of a replica ended (exit code, or the signal that ended it). */
export interface ProcessExit {
  nodeRank: number;
  code: number | null;
  signal: string | null;
}

/** The running processes of one replica. */
export interface LaunchedReplica {
  pids(): number[];
  /** Called once per node process that exits without `stop()` having been asked. */
  onExit(cb: (e: ProcessExit) => void): void;
  /** The last `lines` lines of every node's stdout and stderr, prefixed with the node rank. */
  logTail(lines?: number): string;
  /** SIGTERM to every node's process group, SIGKILL after `graceMs`; resolves when all are gone. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}
