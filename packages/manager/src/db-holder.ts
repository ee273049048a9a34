import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { identifyProcess, processStartTime } from '@uis/sglang-engine';
import { type Clock, type Logger, silentLogger, systemClock, UisError } from '@uis/spec';
import { errorMessage } from './runtime.ts';
import type { Db } from './store.ts';

/** How often the holder writes its heartbeat. */
export const HOLDER_HEARTBEAT_MS = 5_000;
/** A heartbeat older than this means its holder is gone (hung, or on another host that died). */
export const HOLDER_STALE_MS = 30_000;

interface HolderRow {
  pid: number;
  host: string;
  port: number | null;
  proc_start: string | null;
  since: number;
  heartbeat_at: number;
  token: string;
}

export interface DatabaseHolderOptions {
  clock?: Clock;
  logger?: Logger;
  /** Default `HOLDER_STALE_MS`; `UIS_DB_STALE_MS` overrides (tests). */
  staleAfterMs?: number;
  heartbeatMs?: number;
  /** Another process took the database over (this one was hung past the bound): stop writing at once. */
  onLost?: (holder: string) => void;
}

/**
 * One writer per database file: the `db_holder` row names the `uis` process that owns the leases, batches and
 * engines recorded in it (pid and its start time, host, port) and a heartbeat it refreshes. A second process finds
 * a live holder and is refused (409 `database_in_use`, naming it) before it touches anything, adoption included. A
 * holder is gone when its pid is gone (same host) or its heartbeat is older than the bound; it is then taken over,
 * in one immediate transaction so two newcomers cannot both win. A holder that was only hung finds the row no longer
 * names it at its next heartbeat and is told (`onLost`).
 */
export class DatabaseHolder {
  readonly #token = randomBytes(12).toString('hex');
  #timer: NodeJS.Timeout | null = null;
  #held = false;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly staleAfterMs: number;

  constructor(
    private readonly db: Db,
    private readonly path: string,
    private readonly opts: DatabaseHolderOptions = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.logger = opts.logger ?? silentLogger;
    const env = Number(process.env.UIS_DB_STALE_MS);
    this.staleAfterMs = opts.staleAfterMs ?? (Number.isFinite(env) && env > 0 ? env : HOLDER_STALE_MS);
  }

  /** Takes the database, or throws 409 `database_in_use` naming the live holder. */
  claim(port: number | null = null): void {
    const now = this.clock.now();
    this.db
      .transaction(() => {
        const row = this.db.prepare('SELECT * FROM db_holder WHERE id = 1').get() as HolderRow | undefined;
        if (row) {
          const gone = this.gone(row, now);
          if (gone === null)
            throw new UisError({
              code: 'database_in_use',
              path: this.path,
              message: `the database is in use by ${describe(row)} (holder since ${new Date(row.since).toISOString()}, last heartbeat ${Math.round((now - row.heartbeat_at) / 1000)} s ago); stop that uis first or give another --db`,
              details: { pid: row.pid, host: row.host, port: row.port },
            });
          this.logger.warn(
            { db: this.path, previous: describe(row), why: gone },
            'taking the database over from a holder that is gone',
          );
        }
        this.db
          .prepare(
            `INSERT OR REPLACE INTO db_holder (id, pid, host, port, proc_start, since, heartbeat_at, token)
             VALUES (1, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(process.pid, hostname(), port, processStartTime(process.pid), now, now, this.#token);
      })
      .immediate();
    this.#held = true;
    this.#timer = setInterval(() => this.heartbeat(), this.opts.heartbeatMs ?? HOLDER_HEARTBEAT_MS);
    this.#timer.unref();
  }

  /** The port this holder serves on, once it listens (for the message a second process prints). */
  listening(port: number): void {
    if (this.#held) this.db.prepare('UPDATE db_holder SET port = ? WHERE token = ?').run(port, this.#token);
  }

  /** Gives the database up (a clean stop, after everything that writes has stopped). */
  release(): void {
    this.stopBeating();
    if (!this.#held) return;
    this.#held = false;
    try {
      this.db.prepare('DELETE FROM db_holder WHERE token = ?').run(this.#token);
    } catch (e) {
      // A stale row is taken over by the next start anyway (its pid is gone).
      this.logger.warn({ db: this.path, err: errorMessage(e) }, 'could not clear the database holder row');
    }
  }

  /** Why the recorded holder is gone, or null when it is alive. */
  private gone(row: HolderRow, now: number): string | null {
    if (row.host === hostname() && identifyProcess({ pid: row.pid, startTime: row.proc_start }) === 'gone')
      return `pid ${row.pid} is gone`;
    const age = now - row.heartbeat_at;
    if (age > this.staleAfterMs)
      return `its heartbeat is ${Math.round(age / 1000)} s old (the bound is ${Math.round(this.staleAfterMs / 1000)} s)`;
    return null;
  }

  /** Refreshes the heartbeat (every `heartbeatMs`); finds out when another process took the database over. */
  heartbeat(): void {
    try {
      const changed = this.db
        .prepare('UPDATE db_holder SET heartbeat_at = ? WHERE token = ?')
        .run(this.clock.now(), this.#token).changes;
      if (changed > 0) return;
      const row = this.db.prepare('SELECT * FROM db_holder WHERE id = 1').get() as HolderRow | undefined;
      this.#held = false;
      this.stopBeating();
      const by = row ? describe(row) : 'nobody';
      this.logger.error({ db: this.path, holder: by }, 'another process took this database over');
      this.opts.onLost?.(by);
    } catch (e) {
      // A full or read-only disk: the write is refused; the next beat tries again (past the bound, a newcomer may
      // take over and this process is told at its next successful beat).
      this.logger.warn({ db: this.path, err: errorMessage(e) }, 'database heartbeat not written');
    }
  }

  private stopBeating(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}

function describe(row: HolderRow): string {
  return `uis pid ${row.pid} on ${row.host}${row.port === null ? '' : ` port ${row.port}`}`;
}
