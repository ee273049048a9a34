import { type Clock, UisError } from '@uis/spec';
import { isStale, type StalenessBound } from './staleness.ts';

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** Engine answers that are errors: their body for the error's details (JSON when it is JSON). */
export async function errorBody(res: Response): Promise<unknown> {
  const text = await res.text().catch(() => '');
  try {
    return JSON.parse(text);
  } catch {
    return text.slice(0, 2000);
  }
}

let counter = 0;
const prefix = `direct-${Math.random().toString(36).slice(2, 10)}-`;

/** An abort is sent again after this long, then twice as long each time up to RESEND_MAX_MS, at most
 * RESEND_LIMIT times, while its request runs (the gateway's rule for the requests it holds): SGLang drops an abort
 * of a rid its tokenizer manager has not registered yet (0.5.2-0.5.23: `rid not in self.rid_to_state`), which a
 * request sent a moment before may not be. */
export const RESEND_FIRST_MS = 25;
export const RESEND_MAX_MS = 400;
export const RESEND_LIMIT = 40;

/** Whether a `/generate` body is a batch (a list of texts or of token id lists): a batch keeps the rids it has. */
function isBatch(body: Record<string, unknown>): boolean {
  const ids = body.input_ids;
  return Array.isArray(body.text) || (Array.isArray(ids) && Array.isArray(ids[0]));
}

/** One attempt of a request in flight: where it went, its model and the version its replica served then. */
interface InFlight {
  base: string;
  model: string | null;
  weightVersion: string | null;
  /** Set once it is aborted (by its caller or for staleness): stops its re-sends. */
  aborting?: AbortController;
}

/** Where a request went (`hold`): an engine's URL or the gateway's role URL, the resolved model and the version
 * the replica served when it was chosen (null: unknown, e.g. the gateway chose). */
export interface Holder {
  base: string;
  model?: string | null;
  weightVersion?: string | null;
}

/**
 * The direct client's requests in flight by rid (SGLang's request id), and where each went, so `abort(rid)` reaches
 * that replica (or the gateway, after a fallback): as the gateway does, a single request without a rid gets one.
 * An abort is sent again, backing off on the clock, until the request's answer ends (see RESEND_FIRST_MS).
 */
export class DirectRequests {
  readonly #at = new Map<string, InFlight>();

  constructor(
    private readonly fetchFn: FetchLike,
    private readonly clock: Clock,
  ) {}

  /** The body with a rid (one added to a single request that has none) and that rid (undefined: a batch). */
  withRid(body: Record<string, unknown>): { body: Record<string, unknown>; rid: string | undefined } {
    if (typeof body.rid === 'string') return { body, rid: body.rid };
    if (body.rid !== undefined || isBatch(body)) return { body, rid: undefined };
    const rid = `${prefix}${(++counter).toString(36)}`;
    return { body: { ...body, rid }, rid };
  }

  /** `holder` holds `rid` until the returned function is called (the attempt's answer ended or failed); that
   * function says whether the attempt was aborted meanwhile (then its request is not retried elsewhere). */
  hold(rid: string | undefined, holder: Holder): () => boolean {
    if (rid === undefined) return () => false;
    const entry: InFlight = {
      base: holder.base,
      model: holder.model ?? null,
      weightVersion: holder.weightVersion ?? null,
    };
    this.#at.set(rid, entry);
    return () => {
      entry.aborting?.abort();
      if (this.#at.get(rid) === entry) this.#at.delete(rid);
      return entry.aborting !== undefined;
    };
  }

  /** Rids whose abort is being sent again (their answers have not ended yet). */
  get resending(): number {
    let n = 0;
    for (const e of this.#at.values()) if (e.aborting !== undefined && !e.aborting.signal.aborted) n++;
    return n;
  }

  /** SGLang's `abort_request {rid}` where the request went, then again until its answer ends: false when no
   * request with `rid` is in flight here. */
  async abort(rid: string): Promise<boolean> {
    const entry = this.#at.get(rid);
    if (entry === undefined) return false;
    this.#keepAborting(rid, entry);
    const res = await this.#send(entry.base, rid, AbortSignal.timeout(10_000));
    if (res.ok) {
      await res.body?.cancel();
      return true;
    }
    // The gateway's 404: the request ended between our lookup and its (the same race as finishing first).
    const details = await errorBody(res);
    if (res.status === 404) return false;
    throw new UisError({
      code: res.status < 500 ? 'engine_rejected' : 'engine_error',
      relayedStatus: res.status,
      path: 'rid',
      message: `abort_request at ${entry.base} answered ${res.status}`,
      details,
    });
  }

  /** Aborts, once each, the requests of the bound's model that started on a version past it (isStale, the rule
   * the gateway applies to the requests it holds); returns their rids. Sent, not awaited, and sent again until
   * each answer ends; the caller gets its partial output (`finish_reason` abort) and resumes it. */
  abortStale(bound: StalenessBound): string[] {
    const out: string[] = [];
    for (const [rid, entry] of this.#at) {
      if (entry.model !== bound.model || entry.aborting !== undefined) continue;
      if (!isStale(bound, entry.weightVersion)) continue;
      out.push(rid);
      this.#keepAborting(rid, entry);
      this.#send(entry.base, rid, AbortSignal.timeout(10_000))
        .then((res) => res.body?.cancel())
        .catch(() => undefined);
    }
    return out;
  }

  /** Stops every re-send (the client closes). */
  close(): void {
    for (const e of this.#at.values()) e.aborting?.abort();
  }

  #send(base: string, rid: string, signal: AbortSignal): Promise<Response> {
    return this.fetchFn(`${base}/abort_request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rid }),
      signal,
    });
  }

  /** Sends the abort of `rid` again, backing off on the clock, until this attempt lets go of it (its answer
   * ended), at most RESEND_LIMIT times. An engine answers an abort of a rid it no longer has with 200, nothing
   * done; a 0.5.23 engine ignores a second abort of a rid it already aborted. */
  #keepAborting(rid: string, entry: InFlight): void {
    if (entry.aborting !== undefined) return;
    const stop = new AbortController();
    entry.aborting = stop;
    void (async () => {
      let wait = RESEND_FIRST_MS;
      for (let sent = 0; sent < RESEND_LIMIT; sent++, wait = Math.min(2 * wait, RESEND_MAX_MS)) {
        await this.clock.sleep(wait, stop.signal);
        // An engine that does not answer now is asked again at the next turn.
        const res = await this.#send(
          entry.base,
          rid,
          AbortSignal.any([stop.signal, AbortSignal.timeout(10_000)]),
        )
          .then(async (r) => {
            await r.body?.cancel();
            return r;
          })
          .catch(() => undefined);
        // The gateway (after a fallback) no longer holds the rid: its request ended.
        if (res?.status === 404) break;
      }
      stop.abort();
    })().catch(() => undefined);
  }
}
