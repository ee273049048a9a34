import { type Clock, systemClock } from '@uis/spec';
import { z } from 'zod';
import type { Db } from './store.ts';

/**
 * What an operator said about a model, durably:
 * - `held`: drained by `drain_model` / `deactivate_model`; asleep across phase changes until `activate_model`.
 * - `drained`: put to sleep by a drain / deactivate of its whole role; asleep until the role's next activation
 *   (the operator's `activate`, or its phase onloading it).
 */
export const OperatorIntentKindSchema = z.enum(['held', 'drained']);
export type OperatorIntentKind = z.infer<typeof OperatorIntentKindSchema>;

export interface OperatorIntent {
  role: string;
  model: string;
  intent: OperatorIntentKind;
  actor: string | null;
  operation_id: string | null;
  /** When the command was accepted (ms since the epoch). */
  at: number;
}

/** The `operator_intents` table: one row per model an operator's word keeps asleep. The only code that reads or
 * writes it. */
export class OperatorIntentStore {
  readonly #db: Db;
  readonly #all;
  readonly #upsert;
  readonly #deleteModel;
  readonly #deleteKind;
  readonly #clock: Clock;

  constructor(db: Db, clock: Clock = systemClock) {
    this.#db = db;
    this.#clock = clock;
    this.#all = db.prepare('SELECT * FROM operator_intents ORDER BY at, rowid');
    this.#upsert = db.prepare(
      `INSERT INTO operator_intents (role, model, intent, actor, operation_id, at)
       VALUES (@role, @model, @intent, @actor, @operation_id, @at)
       ON CONFLICT(role, model) DO UPDATE SET intent = @intent, actor = @actor, operation_id = @operation_id,
         at = @at`,
    );
    this.#deleteModel = db.prepare('DELETE FROM operator_intents WHERE role = ? AND model = ?');
    this.#deleteKind = db.prepare('DELETE FROM operator_intents WHERE role = ? AND intent = ?');
  }

  /** Every recorded intent, oldest first. */
  list(): OperatorIntent[] {
    return (this.#all.all() as Array<OperatorIntent & { intent: string }>).map((r) => ({
      ...r,
      intent: OperatorIntentKindSchema.parse(r.intent),
    }));
  }

  /** Records `intent` for each of `models` of `role` in one transaction (a later word replaces an earlier one). */
  set(
    role: string,
    models: readonly string[],
    intent: OperatorIntentKind,
    who: { actor: string | null; operation_id: string | null },
  ): void {
    const at = this.#clock.now();
    this.#db.transaction(() => {
      for (const model of models) this.#upsert.run({ role, model, intent, ...who, at });
    })();
  }

  /** Forgets the word about one model. True when there was one. */
  forget(role: string, model: string): boolean {
    return this.#deleteModel.run(role, model).changes > 0;
  }

  /** Forgets every `intent` of `role`; answers how many there were. */
  forgetAll(role: string, intent: OperatorIntentKind): number {
    return this.#deleteKind.run(role, intent).changes;
  }
}
