import type { SGLangEngine } from '@uis/sglang-engine';
import { UisError } from '@uis/spec';
import { z } from 'zod';

/** Why a request was aborted at its engine: a caller's `abort_request {rid}`, an `abort_request {abort_all}`, or
 * its client going away. */
export const AbortReasonSchema = z.enum(['abort_request', 'abort_all', 'client_disconnect']);
export type AbortReason = z.infer<typeof AbortReasonSchema>;

/** The body of `/<role>/abort_request` and of the abort_request command: SGLang's `{rid}` or `{abort_all: true}`,
 * and for abort_all the `model` it is limited to (default: every model of the role). */
export const AbortRequestInputSchema = z
  .strictObject({
    rid: z.string().min(1).optional(),
    abort_all: z.boolean().optional(),
    model: z.string().min(1).optional(),
  })
  .superRefine((b, ctx) => {
    const all = b.abort_all === true;
    if (all === (b.rid !== undefined))
      ctx.addIssue({
        code: 'custom',
        path: all ? ['rid'] : ['abort_all'],
        message: all ? 'give a rid or abort_all: true, not both' : 'give a rid or abort_all: true',
      });
    if (!all && b.model !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['model'],
        message: 'model limits abort_all; a rid names its request (and model) already',
      });
  });
export type AbortRequestInput = z.input<typeof AbortRequestInputSchema>;

export const AbortResultSchema = z.object({
  /** The requests the gateway held that the abort reached (each caller gets its partial output). */
  aborted: z.array(z.object({ rid: z.string(), model: z.string(), engine_id: z.string().nullable() })),
  /** The replicas asked to abort (abort_all also reaches requests sent to them directly). */
  engines: z.array(z.string()),
});
export type AbortResult = z.infer<typeof AbortResultSchema>;

/** A request the gateway has forwarded and not yet answered: its model, the replica that holds it (null: the
 * model's SGLang router chose) and the gateway's request id. */
export interface HeldRequest {
  model: string;
  engineId: string | null;
  requestId: string;
}

/** What an abort needs of the role's replicas. */
export interface AbortTargets {
  /** The model's replicas with a running engine (their requests can be aborted). */
  running(model: string): Array<{ engineId: string; engine: SGLangEngine }>;
  /** The role's model names; throws 404 `unknown_model` for a name that is none. */
  models(model?: string): string[];
}

/** Told of every abort: `n` requests of `model` aborted for `reason`. */
export type AbortListener = (model: string, reason: AbortReason, n: number) => void;

/**
 * Which replica holds each request id (rid) the gateway has in flight, so `abort_request {rid}` reaches that
 * replica only; every abort, from any door, is told to the listeners (the gateway's metrics). The gateway holds a
 * rid when it sends the request to a replica (again on a retry) and lets go when the request ends.
 */
export class HeldRequests {
  readonly #byRid = new Map<string, HeldRequest>();
  readonly #listeners = new Set<AbortListener>();

  hold(rid: string, held: HeldRequest): void {
    this.#byRid.set(rid, held);
  }

  /** Lets go of `rid` if this request still holds it (a later request may reuse the rid). */
  release(rid: string, requestId: string): void {
    if (this.#byRid.get(rid)?.requestId === requestId) this.#byRid.delete(rid);
  }

  get(rid: string): HeldRequest | undefined {
    return this.#byRid.get(rid);
  }

  get size(): number {
    return this.#byRid.size;
  }

  /** Calls `listener` on every abort; returns the unsubscribe function. */
  onAborted(listener: AbortListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  counted(model: string, reason: AbortReason, n = 1): void {
    if (n > 0) for (const l of this.#listeners) l(model, reason, n);
  }

  /**
   * Aborts as SGLang's `/abort_request` does, at the replicas that hold the work: a rid at the one replica the
   * gateway sent it to (every running replica of its model when its SGLang router chose: the rid is unique, the
   * others ignore it), 404 `unknown_rid` when the gateway holds no such request; abort_all at every running
   * replica of the model (or of the role), which also ends requests sent to them directly.
   */
  async abort(input: AbortRequestInput, targets: AbortTargets): Promise<AbortResult> {
    if (input.rid !== undefined) {
      const rid = input.rid;
      const held = this.#byRid.get(rid);
      if (held === undefined)
        throw new UisError({
          code: 'unknown_rid',
          path: 'rid',
          message: `no request with rid ${JSON.stringify(rid)} is in flight through this gateway (it may have finished already)`,
        });
      const replicas = targets
        .running(held.model)
        .filter((r) => held.engineId === null || r.engineId === held.engineId);
      await Promise.all(replicas.map((r) => r.engine.client.abortRequest(rid)));
      this.counted(held.model, 'abort_request');
      return { aborted: [{ rid, model: held.model, engine_id: held.engineId }], engines: ids(replicas) };
    }
    const models = targets.models(input.model);
    const aborted = [...this.#byRid]
      .filter(([, h]) => models.includes(h.model))
      .map(([rid, h]) => ({ rid, model: h.model, engine_id: h.engineId }));
    const replicas = models.flatMap((m) => targets.running(m));
    await Promise.all(replicas.map((r) => r.engine.client.abortAll()));
    for (const m of models) this.counted(m, 'abort_all', aborted.filter((a) => a.model === m).length);
    return { aborted, engines: ids(replicas) };
  }
}

const ids = (replicas: Array<{ engineId: string }>) => replicas.map((r) => r.engineId).sort();
