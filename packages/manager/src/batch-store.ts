import { randomUUID } from 'node:crypto';
import {
  type BatchKind,
  BatchKindSchema,
  type BatchState,
  type Clock,
  canTransitionBatch,
  parseOrThrow,
  scorerOf,
  systemClock,
  UisError,
} from '@uis/spec';
import { z } from 'zod';
import type { Db } from './store.ts';

/** GenRM scoring: a judge conversation (+ optional sampling overrides) -> a text answer and its score. */
export const GenrmInputSchema = z.strictObject({
  messages: z
    .array(z.strictObject({ role: z.enum(['system', 'user', 'assistant']), content: z.string() }))
    .min(1),
  sampling_params: z.record(z.string(), z.unknown()).optional(),
});
export type GenrmInput = z.infer<typeof GenrmInputSchema>;

/** OPD teacher prefill: the full sequence, where logprobs start (SGLang's `logprob_start_len`), and which of the
 * returned positions to keep: the last `response_length` of them (the response tokens), or all when absent. */
export const TeacherInputSchema = z
  .strictObject({
    input_ids: z.array(z.number().int().nonnegative()).min(1),
    logprob_start_len: z.number().int().nonnegative(),
    response_length: z.number().int().positive().optional(),
  })
  .superRefine((v, ctx) => {
    const available = v.input_ids.length - v.logprob_start_len;
    if (available < 1)
      ctx.addIssue({
        code: 'custom',
        path: ['logprob_start_len'],
        message: `must be < input_ids length (${v.input_ids.length})`,
      });
    else if (v.response_length !== undefined && v.response_length > available)
      ctx.addIssue({
        code: 'custom',
        path: ['response_length'],
        message: `selects ${v.response_length} tokens but only ${available} follow logprob_start_len`,
      });
  });
export type TeacherInput = z.infer<typeof TeacherInputSchema>;

export interface GenrmOutput {
  response: string;
  score: number;
}
export interface TeacherOutput {
  /** One logprob per selected token (null only for the sequence's first token, which has no context). */
  logprobs: Array<number | null>;
  token_ids: number[];
}

export const SubmitSamplesSchema = z.strictObject({
  samples: z
    .array(z.strictObject({ sample_id: z.string().min(1), input: z.unknown() }))
    .min(1)
    .max(100_000),
});

export interface BatchInfo {
  id: string;
  kind: BatchKind;
  role: string;
  model: string | null;
  state: BatchState;
  reason: string | null;
  attempts: number;
  samples: number;
  results: number;
  created_at: number;
  updated_at: number;
  /** When its last run began (sealed -> running); null until it first ran. */
  started_at: number | null;
  committed_at: number | null;
}

export interface SampleRow<I = unknown, O = unknown> {
  idx: number;
  sample_id: string;
  input: I;
  output: O | null;
}

function notFound(id: string): UisError {
  return new UisError({ code: 'batch_not_found', path: 'batch_id', message: `no batch ${id}` });
}

/** Durable deferred batches (SQLite). Samples and staged results are written as they arrive, so a restart loses
 * nothing; outputs reach the samples only in the commit transaction, which first checks the batch is still
 * `running` (a second commit finds it `committed` and is refused). */
export class BatchStore {
  constructor(
    readonly db: Db,
    private readonly clock: Clock = systemClock,
  ) {}

  create(opts: { kind: BatchKind; model?: string | null; id?: string }): BatchInfo {
    const kind = parseOrThrow(BatchKindSchema, opts.kind, 'kind');
    const id = opts.id ?? randomUUID();
    const at = this.clock.now();
    try {
      this.db
        .prepare(
          `INSERT INTO batches (id, kind, role, model, state, created_at, updated_at) VALUES (?, ?, ?, ?, 'open', ?, ?)`,
        )
        .run(id, kind, scorerOf(kind), opts.model ?? null, at, at);
    } catch (e) {
      if (String(e).includes('UNIQUE'))
        throw new UisError({
          code: 'batch_exists',
          path: 'id',
          message: `batch ${id} already exists`,
        });
      throw e;
    }
    return this.get(id);
  }

  get(id: string): BatchInfo {
    const row = this.db
      .prepare(
        `SELECT b.*, (SELECT COUNT(*) FROM samples s WHERE s.batch_id = b.id) AS samples,
                (SELECT COUNT(*) FROM results r WHERE r.batch_id = b.id) AS results
         FROM batches b WHERE b.id = ?`,
      )
      .get(id) as BatchInfo | undefined;
    if (!row) throw notFound(id);
    return row;
  }

  list(filter: { state?: BatchState; role?: string } = {}): BatchInfo[] {
    const ids = this.db
      .prepare(
        `SELECT id FROM batches WHERE (@state IS NULL OR state = @state) AND (@role IS NULL OR role = @role)
         ORDER BY created_at, id`,
      )
      .all({ state: filter.state ?? null, role: filter.role ?? null }) as Array<{ id: string }>;
    return ids.map((r) => this.get(r.id));
  }

  /** The newest `limit` batches, oldest first: one query, so a long-running service shows a few without listing
   * every batch it ever ran. */
  newest(limit: number): BatchInfo[] {
    const rows = this.db
      .prepare('SELECT id FROM batches ORDER BY created_at DESC, id DESC LIMIT ?')
      .all(limit) as Array<{ id: string }>;
    return rows.reverse().map((r) => this.get(r.id));
  }

  /** How many batches there are per kind and state (for metrics), in one query. */
  counts(): Array<{ kind: BatchKind; state: BatchState; count: number }> {
    return this.db
      .prepare('SELECT kind, state, COUNT(*) AS count FROM batches GROUP BY kind, state ORDER BY kind, state')
      .all() as Array<{ kind: BatchKind; state: BatchState; count: number }>;
  }

  /** Adds samples to an open batch; every input is validated for the batch's kind (errors name
   * `samples[i].input.<field>`). All or nothing. */
  addSamples(id: string, body: unknown): BatchInfo {
    const { samples } = parseOrThrow(SubmitSamplesSchema, body, '', 'invalid_samples');
    const batch = this.get(id);
    const schema = batch.kind === 'genrm_score' ? GenrmInputSchema : TeacherInputSchema;
    const inputs = samples.map((s, i) =>
      parseOrThrow(schema, s.input, `samples[${i}].input`, 'invalid_samples'),
    );
    this.db.transaction(() => {
      const state = (
        this.db.prepare('SELECT state FROM batches WHERE id = ?').get(id) as { state: BatchState }
      ).state;
      if (state !== 'open')
        throw new UisError({
          code: 'batch_not_open',
          message: `batch ${id} is ${state}; samples can only be added to an open batch`,
        });
      const base = (
        this.db.prepare('SELECT COALESCE(MAX(idx) + 1, 0) AS n FROM samples WHERE batch_id = ?').get(id) as {
          n: number;
        }
      ).n;
      const insert = this.db.prepare(
        'INSERT INTO samples (batch_id, idx, sample_id, input) VALUES (?, ?, ?, ?)',
      );
      samples.forEach((s, i) => {
        try {
          insert.run(id, base + i, s.sample_id, JSON.stringify(inputs[i]));
        } catch (e) {
          if (String(e).includes('UNIQUE'))
            throw new UisError({
              code: 'sample_exists',
              path: `samples[${i}].sample_id`,
              message: `sample ${s.sample_id} is already in batch ${id}`,
            });
          throw e;
        }
      });
      this.touch(id);
    })();
    return this.get(id);
  }

  /** No more samples: the batch waits for its scorer's phase. */
  seal(id: string): BatchInfo {
    const b = this.get(id);
    if (b.state === 'sealed') return b;
    if (b.state !== 'open')
      throw new UisError({ code: 'batch_not_open', message: `batch ${id} is ${b.state}` });
    if (b.samples === 0) throw new UisError({ code: 'batch_empty', message: `batch ${id} has no samples` });
    this.setState(id, 'open', 'sealed');
    return this.get(id);
  }

  /** sealed -> running; returns the samples that still need a result (staged results from an interrupted run are
   * kept and not redone). */
  beginRun(id: string): Array<SampleRow> {
    return this.db.transaction(() => {
      const b = this.get(id);
      if (b.state !== 'sealed')
        throw new UisError({
          code: 'batch_not_runnable',
          message: `batch ${id} is ${b.state}; only a sealed batch can run`,
        });
      this.db
        .prepare(
          "UPDATE batches SET state = 'running', attempts = attempts + 1, updated_at = @at, started_at = @at WHERE id = @id",
        )
        .run({ at: this.clock.now(), id });
      const rows = this.db
        .prepare(
          `SELECT s.idx, s.sample_id, s.input FROM samples s
           WHERE s.batch_id = ? AND NOT EXISTS (SELECT 1 FROM results r WHERE r.batch_id = s.batch_id AND r.idx = s.idx)
           ORDER BY s.idx`,
        )
        .all(id) as Array<{ idx: number; sample_id: string; input: string }>;
      return rows.map((r) => ({
        idx: r.idx,
        sample_id: r.sample_id,
        input: JSON.parse(r.input),
        output: null,
      }));
    })();
  }

  /** Stages one validated result (durable at once); refused unless the batch is running. */
  stageResult(id: string, idx: number, output: unknown): void {
    const info = this.db
      .prepare(
        `INSERT OR REPLACE INTO results (batch_id, idx, output)
         SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM batches WHERE id = ? AND state = 'running')`,
      )
      .run(id, idx, JSON.stringify(output), id);
    if (info.changes !== 1)
      throw new UisError({ code: 'batch_not_running', message: `batch ${id} is not running` });
  }

  /** Writes every staged result to its sample and marks the batch committed, in one transaction. */
  commit(id: string): BatchInfo {
    this.db.transaction(() => {
      const b = this.get(id);
      if (b.state !== 'running')
        throw new UisError({
          code: b.state === 'committed' ? 'batch_already_committed' : 'batch_not_running',
          message: `batch ${id} is ${b.state}; only a running batch can commit (never twice)`,
        });
      if (b.results !== b.samples)
        throw new UisError({
          code: 'batch_incomplete',
          message: `batch ${id} has ${b.results} results for ${b.samples} samples`,
        });
      this.db
        .prepare(
          `UPDATE samples SET output = (SELECT r.output FROM results r WHERE r.batch_id = samples.batch_id AND r.idx = samples.idx)
           WHERE batch_id = ?`,
        )
        .run(id);
      const at = this.clock.now();
      const info = this.db
        .prepare(
          "UPDATE batches SET state = 'committed', committed_at = ?, updated_at = ? WHERE id = ? AND state = 'running'",
        )
        .run(at, at, id);
      if (info.changes !== 1)
        throw new UisError({ code: 'batch_not_running', message: `batch ${id} changed state` });
    })();
    return this.get(id);
  }

  /** Fails a batch whole with its reason; nothing reaches the samples. */
  fail(id: string, reason: string): BatchInfo {
    const info = this.db
      .prepare(
        "UPDATE batches SET state = 'failed', reason = ?, updated_at = ? WHERE id = ? AND state IN ('open', 'sealed', 'running')",
      )
      .run(reason, this.clock.now(), id);
    if (info.changes !== 1) {
      const b = this.get(id);
      throw new UisError({ code: 'batch_final', message: `batch ${id} is already ${b.state}` });
    }
    return this.get(id);
  }

  /** running -> sealed after a run the engines could not finish (unreachable, timeouts, bad answers, no eligible
   * replica, an interrupted phase): staged results are kept, the reason is recorded, and the next scorer phase
   * runs only the rest. Accepted samples are never dropped for an engine's fault. */
  requeue(id: string, reason: string): BatchInfo {
    const info = this.db
      .prepare(
        "UPDATE batches SET state = 'sealed', reason = ?, updated_at = ? WHERE id = ? AND state = 'running'",
      )
      .run(reason, this.clock.now(), id);
    if (info.changes !== 1) {
      const b = this.get(id);
      throw new UisError({
        code: 'batch_not_running',
        message: `batch ${id} is ${b.state}; only a running batch goes back to sealed`,
      });
    }
    return this.get(id);
  }

  /** After a restart: batches left `running` by the dead process are resumed (back to sealed, staged results kept)
   * or failed, explicitly. Returns what was done. */
  recover(policy: 'resume' | 'fail'): Array<{ id: string; action: 'resumed' | 'failed' }> {
    return this.db.transaction(() => {
      const running = this.db.prepare("SELECT id FROM batches WHERE state = 'running'").all() as Array<{
        id: string;
      }>;
      for (const { id } of running) {
        if (policy === 'resume')
          this.db
            .prepare("UPDATE batches SET state = 'sealed', updated_at = ? WHERE id = ?")
            .run(this.clock.now(), id);
        else
          this.db
            .prepare("UPDATE batches SET state = 'failed', reason = ?, updated_at = ? WHERE id = ?")
            .run('manager restarted while the batch was running', this.clock.now(), id);
      }
      return running.map(({ id }) => ({
        id,
        action: policy === 'resume' ? ('resumed' as const) : ('failed' as const),
      }));
    })();
  }

  /** The samples with their written-back outputs (null until the batch is committed). */
  samples<I = unknown, O = unknown>(id: string): Array<SampleRow<I, O>> {
    this.get(id);
    const rows = this.db
      .prepare('SELECT idx, sample_id, input, output FROM samples WHERE batch_id = ? ORDER BY idx')
      .all(id) as Array<{ idx: number; sample_id: string; input: string; output: string | null }>;
    return rows.map((r) => ({
      idx: r.idx,
      sample_id: r.sample_id,
      input: JSON.parse(r.input) as I,
      output: r.output === null ? null : (JSON.parse(r.output) as O),
    }));
  }

  private touch(id: string): void {
    this.db.prepare('UPDATE batches SET updated_at = ? WHERE id = ?').run(this.clock.now(), id);
  }

  private setState(id: string, from: BatchState, to: BatchState): void {
    if (!canTransitionBatch(from, to)) throw new Error(`batch ${id}: illegal transition ${from} -> ${to}`);
    const info = this.db
      .prepare('UPDATE batches SET state = ?, updated_at = ? WHERE id = ? AND state = ?')
      .run(to, this.clock.now(), id, from);
    if (info.changes !== 1)
      throw new UisError({
        code: 'batch_state_changed',
        message: `batch ${id} is no longer ${from}`,
      });
  }
}
