import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { bodyTooLarge, DEFAULT_MAX_BODY_BYTES, errorJson } from '../proxy/index.ts';

/** Refuses (413) a body over `limit` bytes before a handler buffers it; the gateway's body limit applies to every
 * route, not only to serving. */
export function jsonBodyLimit(limit: number = DEFAULT_MAX_BODY_BYTES): MiddlewareHandler {
  return bodyLimit({ maxSize: limit, onError: (c) => errorJson(c, bodyTooLarge(limit)) });
}
