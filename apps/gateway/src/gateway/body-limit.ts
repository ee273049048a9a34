import { UisError } from '@uis/spec';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { DEFAULT_MAX_BODY_BYTES, ProxyErrorCode } from '../proxy/index.ts';

/** The serving routes' 413, for bodies the Hono routes (admin, tRPC) read. */
export function bodyTooLarge(limit: number): UisError {
  return new UisError({
    code: ProxyErrorCode.bodyTooLarge,
    status: 413,
    path: 'body',
    message: `request body exceeds the ${limit} byte limit; send a smaller body or raise the gateway's body limit`,
  });
}

/** Refuses (413) a body over `limit` bytes before a handler buffers it; the gateway's body limit applies to every
 * route, not only to serving. */
export function jsonBodyLimit(limit: number = DEFAULT_MAX_BODY_BYTES): MiddlewareHandler {
  return bodyLimit({ maxSize: limit, onError: (c) => c.json(bodyTooLarge(limit).toJSON(), 413) });
}
