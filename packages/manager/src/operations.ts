import { type Clock, isErrorCode, systemClock, UisError } from '@uis/spec';
import type { Db } from './store.ts';

interface OperationRow {
  id: string;
  fingerprint: string;
  status: 'running' | 'succeeded' | 'failed';
  result: string | null;
}

/** Stable fingerprint of a request: same operation id + same fingerprint = the same operation. */
export function fingerprint(request: unknown): string {
  return JSON.stringify(request, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

/** Operation ids make retried admin calls safe: a repeated id joins the running operation or returns its stored
 * result; the same id with a different request is refused with 409. Results are durable, so a retry after a
 * manager restart still gets the first answer instead of running the operation twice. */
export class OperationLedger {
  private readonly running = new Map<string, { fp: string; promise: Promise<unknown> }>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock = systemClock,
    /** What an operation cut by a restart should be followed by, from the service's state now (a blocked lease
     * to resolve, or nothing left to do): told to the caller who retries its id. */
    private readonly afterRestart: () => string = () =>
      'read the current state and retry with a new id if it is still wanted',
  ) {}

  async run<T>(id: string, request: unknown, fn: () => Promise<T>): Promise<T> {
    const fp = fingerprint(request);
    const live = this.running.get(id);
    if (live) {
      if (live.fp !== fp) throw conflict(id);
      return live.promise as Promise<T>;
    }
    const row = this.db.prepare('SELECT * FROM operations WHERE id = ?').get(id) as OperationRow | undefined;
    if (row) {
      if (row.fingerprint !== fp) throw conflict(id);
      if (row.status === 'succeeded') return JSON.parse(row.result ?? 'null') as T;
      if (row.status === 'failed') {
        const err = JSON.parse(row.result ?? '{}') as { code?: string; message?: string; status?: number };
        throw new UisError({
          code: isErrorCode(err.code) ? err.code : 'operation_failed',
          relayedStatus: err.status,
          message: `operation ${id} failed earlier: ${err.message ?? 'unknown reason'}`,
        });
      }
      // 'running' without a live promise: the process died mid-operation; it is reported, not re-run blindly.
      throw new UisError({
        code: 'operation_interrupted',
        message: `operation ${id} was cut by a restart of the service before it finished and is not re-run; ${this.afterRestart()}`,
      });
    }
    this.db
      .prepare("INSERT INTO operations (id, fingerprint, status, created_at) VALUES (?, ?, 'running', ?)")
      .run(id, fp, this.clock.now());
    const promise = (async () => {
      try {
        const result = await fn();
        this.db
          .prepare("UPDATE operations SET status = 'succeeded', result = ?, finished_at = ? WHERE id = ?")
          .run(JSON.stringify(result ?? null), this.clock.now(), id);
        return result;
      } catch (e) {
        const body =
          e instanceof UisError
            ? { code: e.code, message: e.message, status: e.status }
            : { code: 'operation_failed', message: e instanceof Error ? e.message : String(e), status: 500 };
        this.db
          .prepare("UPDATE operations SET status = 'failed', result = ?, finished_at = ? WHERE id = ?")
          .run(JSON.stringify(body), this.clock.now(), id);
        throw e;
      } finally {
        this.running.delete(id);
      }
    })();
    this.running.set(id, { fp, promise });
    return promise;
  }
}

function conflict(id: string): UisError {
  return new UisError({
    code: 'operation_id_conflict',
    path: 'operation_id',
    message: `operation id ${id} was already used for a different request; use a new id`,
  });
}
