import { type ScaleOperation, ScaleOperationSchema, scaleFinished } from '@uis/spec';
import type { Db } from './store.ts';

/** The `scale_ops` table: one row per scale operation, the whole record as JSON beside the columns it is found by.
 * The only code that reads or writes it. */
export class ScaleOperationStore {
  readonly #upsert;
  readonly #get;
  readonly #list;

  constructor(db: Db) {
    this.#upsert = db.prepare(
      `INSERT INTO scale_ops (request_id, role, model, status, data, created_at)
       VALUES (@request_id, @role, @model_name, @status, @data, @created_at)
       ON CONFLICT(request_id) DO UPDATE SET status = @status, data = @data`,
    );
    this.#get = db.prepare('SELECT data FROM scale_ops WHERE request_id = ?');
    this.#list = db.prepare('SELECT data FROM scale_ops ORDER BY created_at, rowid');
  }

  put(op: ScaleOperation): void {
    this.#upsert.run({ ...op, data: JSON.stringify(op) });
  }

  get(requestId: string): ScaleOperation | null {
    const row = this.#get.get(requestId) as { data: string } | undefined;
    return row ? ScaleOperationSchema.parse(JSON.parse(row.data)) : null;
  }

  /** Every operation, oldest first. */
  list(): ScaleOperation[] {
    return (this.#list.all() as Array<{ data: string }>).map((r) =>
      ScaleOperationSchema.parse(JSON.parse(r.data)),
    );
  }

  /** Operations a crash interrupted (not finished), oldest first. */
  unfinished(): ScaleOperation[] {
    return this.list().filter((o) => !scaleFinished(o.status));
  }
}
