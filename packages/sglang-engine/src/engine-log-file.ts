import { closeSync, fstatSync, mkdirSync, openSync, readSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LogRing } from './log-ring.ts';

/** Bytes read from the end of a log file for a tail. */
const TAIL_BYTES = 64 * 1024;

/** Where engines that outlive the control plane write their logs, unless configured. */
export const DEFAULT_ENGINE_LOG_DIR = join(tmpdir(), 'uis-engines');

function readTail(path: string, lines: number): string[] {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return [];
  }
  try {
    const start = Math.max(0, fstatSync(fd).size - TAIL_BYTES);
    const buf = Buffer.alloc(TAIL_BYTES);
    const n = readSync(fd, buf, 0, TAIL_BYTES, start);
    return buf
      .subarray(0, n)
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '')
      .slice(-lines);
  } finally {
    closeSync(fd);
  }
}

/**
 * The logs of engines kept for adoption. Their stdout and stderr cannot be pipes to the control plane: once it dies
 * the pipes break and the engine's next log line fails (EPIPE kills a Node engine, a Python one loses its output).
 * They append to a file per node process instead; the tail is read from the files.
 */
export class FileLogRing extends LogRing {
  private readonly files: Array<{ nodeRank: number; path: string }> = [];

  constructor(
    private readonly dir = DEFAULT_ENGINE_LOG_DIR,
    capacity?: number,
  ) {
    super(capacity);
  }

  /** Opens the log file of one node process; the caller hands the descriptor to the child and closes its copy. */
  open(engineId: string, nodeRank: number): number {
    mkdirSync(this.dir, { recursive: true });
    const name = `${engineId.replace(/[^A-Za-z0-9_.-]/g, '_')}-node${nodeRank}-${Date.now()}.log`;
    const path = join(this.dir, name);
    this.files.push({ nodeRank, path });
    return openSync(path, 'a');
  }

  paths(): string[] {
    return this.files.map((f) => f.path);
  }

  override tail(n = 100): string {
    const fromFiles = this.files.flatMap((f) => readTail(f.path, n).map((l) => `[node ${f.nodeRank}] ${l}`));
    const own = super.tail(n);
    return [...fromFiles, ...(own === '' ? [] : own.split('\n'))].slice(-n).join('\n');
  }
}
