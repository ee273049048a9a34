import { isStale, type StalenessBound } from '@uis/routing';
import type { SGLangEngine } from '@uis/sglang-engine';
import { type Clock, systemClock, UisError } from '@uis/spec';
import { z } from 'zod';

/** Why a request was aborted at its engine: a caller's `abort_request {rid}`, an `abort_request {abort_all}`, its
 * client going away, or its weights falling more than its model's `max_staleness` behind the newest version. */
export const AbortReasonSchema = z.enum(['abort_request', 'abort_all', 'client_disconnect', 'max_staleness']);
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
  /** The version its replica served when the request was sent there: the version of its first output token. */
  weightVersion?: string | null;
}

/** What an abort needs of the role's replicas. */
export interface AbortTargets {
  /** The model's replicas with a running engine (their requests can be aborted). */
  running(model: string): Array<{ engineId: string; engine: SGLangEngine }>;
  /** The role's model names; throws 404 `unknown_model` for a name that is none. */
  models(model?: string): string[];
}

/** An abort is sent again after this long, then twice as long each time up to RESEND_MAX_MS, while its request
 * runs: SGLang ignores an abort of a rid it has not registered yet (a request forwarded a moment before). */
const RESEND_FIRST_MS = 25;
const RESEND_MAX_MS = 400;

/** Told of every abort: `n` requests of `model` aborted for `reason`. */
export type AbortListener = (model: string, reason: AbortReason, n: number) => void;

/**
 * Which replica holds each request id (rid) the gateway has in flight, so `abort_request {rid}` reaches that
 * replica only; every abort, from any door, is told to the listeners (the gateway's metrics). The gateway holds a
 * rid when it sends the request to a replica (again on a retry) and lets go when the request ends.
 *
 * An abort is not lost to the race with the engine's own bookkeeping: SGLang drops an abort of a rid its tokenizer
 * manager has not registered yet, so once a held request is aborted the abort is sent again (backing off, to the
 * replica that holds the request then: a retry moves it) until the request ends.
 */
export class HeldRequests {
  readonly #byRid = new Map<string, HeldRequest>();
  readonly #listeners = new Set<AbortListener>();
  /** Requests already aborted for staleness (each is aborted once; it lets go of its rid when its answer ends). */
  readonly #stale = new WeakSet<HeldRequest>();
  /** The re-sends of each aborted rid still held, stopped when its request ends. */
  readonly #resending = new Map<string, { requestId: string; stop: AbortController }>();

  constructor(private readonly clock: Clock = systemClock) {}

  hold(rid: string, held: HeldRequest): void {
    this.#byRid.set(rid, held);
  }

  /** Lets go of `rid` if this request still holds it (a later request may reuse the rid). */
  release(rid: string, requestId: string): void {
    if (this.#byRid.get(rid)?.requestId !== requestId) return;
    this.#byRid.delete(rid);
    const r = this.#resending.get(rid);
    if (r?.requestId === requestId) {
      this.#resending.delete(rid);
      r.stop.abort();
    }
  }

  /** Rids whose abort is being sent again (their requests have not ended yet). */
  get resending(): number {
    return this.#resending.size;
  }

  /** Stops every re-send (the manager shuts down). */
  close(): void {
    for (const r of this.#resending.values()) r.stop.abort();
    this.#resending.clear();
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
      const replicas = holders(held, targets);
      this.keepAborting(rid, held.requestId, targets);
      await Promise.all(replicas.map((r) => r.engine.client.abortRequest(rid)));
      this.counted(held.model, 'abort_request');
      return { aborted: [{ rid, model: held.model, engine_id: held.engineId }], engines: ids(replicas) };
    }
    const models = targets.models(input.model);
    const held = [...this.#byRid].filter(([, h]) => models.includes(h.model));
    const aborted = held.map(([rid, h]) => ({ rid, model: h.model, engine_id: h.engineId }));
    const replicas = models.flatMap((m) => targets.running(m));
    // abort_all misses a request the engine has not registered yet, as an abort of its rid does: each held one
    // gets its abort sent again until it ends.
    for (const [rid, h] of held) this.keepAborting(rid, h.requestId, targets);
    await Promise.all(replicas.map((r) => r.engine.client.abortAll()));
    for (const m of models) this.counted(m, 'abort_all', aborted.filter((a) => a.model === m).length);
    return { aborted, engines: ids(replicas) };
  }

  /** Sends the abort of `rid` again, backing off, to whichever replica holds it, until request `requestId` ends
   * (or the manager shuts down). An engine answers an abort of a rid it no longer has with 200 and nothing done. */
  private keepAborting(rid: string, requestId: string, targets: AbortTargets): void {
    if (this.#resending.get(rid)?.requestId === requestId) return;
    this.#resending.get(rid)?.stop.abort();
    const stop = new AbortController();
    this.#resending.set(rid, { requestId, stop });
    void (async () => {
      for (let wait = RESEND_FIRST_MS; ; wait = Math.min(2 * wait, RESEND_MAX_MS)) {
        await this.clock.sleep(wait, stop.signal);
        const held = this.#byRid.get(rid);
        if (held?.requestId !== requestId) return;
        // A replica that does not answer now is asked again at the next turn.
        await Promise.all(
          holders(held, targets).map((r) => r.engine.client.abortRequest(rid).catch(() => undefined)),
        );
      }
    })().catch(() => undefined);
  }

  /**
   * Aborts each held request of the bound's model that started on a version past it (isStale of @uis/routing),
   * at the replica that holds it: its caller gets SGLang's abort answer with its partial output and resumes it on
   * newer weights. Counted under `max_staleness`. The aborts are sent, not awaited, and sent again until the
   * request ends (as every abort here).
   */
  abortStale(bound: StalenessBound, targets: AbortTargets): AbortResult['aborted'] {
    const { model } = bound;
    const aborted: AbortResult['aborted'] = [];
    for (const [rid, held] of this.#byRid) {
      if (held.model !== model || this.#stale.has(held) || !isStale(bound, held.weightVersion)) continue;
      this.#stale.add(held);
      aborted.push({ rid, model, engine_id: held.engineId });
      this.keepAborting(rid, held.requestId, targets);
      for (const r of holders(held, targets)) r.engine.client.abortRequest(rid).catch(() => undefined);
    }
    this.counted(model, 'max_staleness', aborted.length);
    return aborted;
  }
}

/** The replicas that may hold a request: the one it was sent to, or every running one of its model when the
 * model's SGLang router chose (the rid is unique; the others ignore it). */
const holders = (held: HeldRequest, targets: AbortTargets) =>
  targets.running(held.model).filter((r) => held.engineId === null || r.engineId === held.engineId);

const ids = (replicas: Array<{ engineId: string }>) => replicas.map((r) => r.engineId).sort();
