import { UisError } from '@uis/spec';

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

/** Whether a `/generate` body is a batch (a list of texts or of token id lists): a batch keeps the rids it has. */
function isBatch(body: Record<string, unknown>): boolean {
  const ids = body.input_ids;
  return Array.isArray(body.text) || (Array.isArray(ids) && Array.isArray(ids[0]));
}

/**
 * The direct client's requests in flight by rid (SGLang's request id), and where each went, so `abort(rid)` reaches
 * that replica (or the gateway, after a fallback): as the gateway does, a single request without a rid gets one.
 */
export class DirectRequests {
  readonly #at = new Map<string, string>();

  /** The body with a rid (one added to a single request that has none) and that rid (undefined: a batch). */
  withRid(body: Record<string, unknown>): { body: Record<string, unknown>; rid: string | undefined } {
    if (typeof body.rid === 'string') return { body, rid: body.rid };
    if (body.rid !== undefined || isBatch(body)) return { body, rid: undefined };
    const rid = `${prefix}${(++counter).toString(36)}`;
    return { body: { ...body, rid }, rid };
  }

  /** `base` (an engine's URL, or the gateway's role URL) holds `rid` until the returned function is called. */
  hold(rid: string | undefined, base: string): () => void {
    if (rid === undefined) return () => undefined;
    this.#at.set(rid, base);
    return () => {
      if (this.#at.get(rid) === base) this.#at.delete(rid);
    };
  }

  /** SGLang's `abort_request {rid}` where the request went: false when no request with `rid` is in flight here. */
  async abort(fetchFn: FetchLike, rid: string): Promise<boolean> {
    const base = this.#at.get(rid);
    if (base === undefined) return false;
    const res = await fetchFn(`${base}/abort_request`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ rid }),
      signal: AbortSignal.timeout(10_000),
    });
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
      message: `abort_request at ${base} answered ${res.status}`,
      details,
    });
  }
}
