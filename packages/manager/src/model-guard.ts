import { UisError } from '@uis/spec';

/** What holds a model: the operation's kind (`scale_out`, `scale_in`, `weight_switch`, ...) and its id. */
export interface ModelHolder {
  kind: string;
  id: string;
}

/**
 * One fleet operation per model at a time: a scale-out, a scale-in or a weight switch takes the model for as long
 * as it runs, and another one is refused with 409 `model_operation_in_progress` naming the holder (Relax refuses a
 * second scale operation the same way). Held in memory: after a restart, the operations that resume take it again.
 */
export class ModelOperationGuard {
  readonly #held = new Map<string, ModelHolder>();

  /** Takes `role/model` for `holder`; answers the release. Throws 409 while another operation holds it. */
  acquire(role: string, model: string, holder: ModelHolder): () => void {
    const key = `${role}/${model}`;
    this.refuseIfHeld(role, model, holder.id);
    this.#held.set(key, holder);
    return () => {
      if (this.#held.get(key)?.id === holder.id) this.#held.delete(key);
    };
  }

  /** Throws 409 while an operation other than `except` holds `role/model`. */
  refuseIfHeld(role: string, model: string, except?: string): void {
    const key = `${role}/${model}`;
    const current = this.#held.get(key);
    if (current && current.id !== except)
      throw new UisError({
        code: 'model_operation_in_progress',
        path: 'model',
        message: `${key} is busy: ${current.kind} ${current.id} is running; wait for it or cancel it`,
        details: { ...current },
      });
  }

  /** The operation holding `role/model`, or null. */
  holder(role: string, model: string): ModelHolder | null {
    return this.#held.get(`${role}/${model}`) ?? null;
  }
}
