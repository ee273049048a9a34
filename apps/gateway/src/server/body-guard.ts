import type { MiddlewareHandler } from 'hono';
import {
  BODY_BUDGET_RETRY_AFTER_S,
  type BodyBudget,
  bodyBudgetSpent,
  bodyTooLarge,
  jsonDepthError,
} from '../proxy/index.ts';

export interface BodyGuardOptions {
  budget: BodyBudget;
  maxBytes: number;
  maxJsonDepth: number;
}

/**
 * Reads the body of every request the framework serves (admin API, tRPC, anything but the serving fast path, which
 * applies the same rules itself) before a handler sees it: its bytes count against the process-wide budget while
 * they arrive (503 + Retry-After when spent), over `maxBytes` is 413, nesting deeper than `maxJsonDepth` is 400
 * `json_too_deep` with the path. The handler then reads the checked bytes from Hono's body cache.
 */
export function bodyGuard(opts: BodyGuardOptions): MiddlewareHandler {
  return async (c, next) => {
    const stream = c.req.raw.body;
    if (stream === null) return next();
    const refuse = (err: ReturnType<typeof bodyTooLarge>, headers: Record<string, string> = {}) =>
      c.json(err.toJSON(), err.status as 400, { connection: 'close', ...headers });
    const retry = { 'retry-after': String(BODY_BUDGET_RETRY_AFTER_S) };
    if (!opts.budget.open) return refuse(bodyBudgetSpent(opts.budget.limit), retry);
    const reader = stream.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    let held = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (!opts.budget.take(value.length)) {
          await reader.cancel().catch(() => undefined);
          return refuse(bodyBudgetSpent(opts.budget.limit), retry);
        }
        held += value.length;
        size += value.length;
        if (size > opts.maxBytes) {
          await reader.cancel().catch(() => undefined);
          return refuse(bodyTooLarge(opts.maxBytes));
        }
        chunks.push(value);
      }
    } finally {
      opts.budget.release(held);
    }
    const bytes = Buffer.concat(chunks, size);
    const deep = jsonDepthError(bytes, opts.maxJsonDepth);
    if (deep !== undefined) return refuse(deep);
    const body = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    // Hono keeps the promise of each body reading in this cache (its type says the value); every later read
    // (`json()`, `text()`, tRPC's through @hono/trpc-server) derives from it.
    (c.req.bodyCache as Record<string, unknown>).arrayBuffer = Promise.resolve(body);
    return next();
  };
}
