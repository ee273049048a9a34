import type { HeldRequests, InferenceManager } from '@uis/manager';
import { UisError } from '@uis/spec';
import type { Hono } from 'hono';
import { asUisError, errorJson, type ProxyTarget, parseJsonObject } from '../proxy/index.ts';
import { ROUTER_PREFIX } from './served-requests.ts';

/** `POST /<role>/abort_request`: SGLang's route on the role's gateway, with the serving token (a rollout worker
 * aborts its own requests), answering what the abort reached (`AbortResult`) instead of SGLang's empty 200. */
export function mountAbortRoute(app: Hono, path: string, manager: InferenceManager): void {
  app.post(path, async (c) => {
    try {
      const body = parseJsonObject(Buffer.from(await c.req.arrayBuffer()));
      if (body instanceof UisError) return errorJson(c, body);
      return c.json(await manager.abortRequests(body));
    } catch (e) {
      return errorJson(c, asUisError(e));
    }
  });
}

/** Records which replica holds a forwarded request's rids, one or a batch's list (a router target: the model's
 * SGLang router chose), and the version it served then (the request's first token's: what max_staleness
 * measures). No closure per request: this runs for every forwarded request. */
export function holdRids(
  held: HeldRequests,
  rid: string | string[],
  model: string,
  target: ProxyTarget,
  requestId: string,
): void {
  const engineId = target.id.startsWith(ROUTER_PREFIX) ? null : target.id;
  const weightVersion = target.weightVersion ?? null;
  if (typeof rid === 'string') held.hold(rid, { model, engineId, requestId, weightVersion });
  else for (const one of rid) held.hold(one, { model, engineId, requestId, weightVersion });
}

export function releaseRids(held: HeldRequests, rid: string | string[] | undefined, requestId: string): void {
  if (typeof rid === 'string') held.release(rid, requestId);
  else if (rid !== undefined) for (const one of rid) held.release(one, requestId);
}
