import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { UisError } from '@uis/spec';
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** Stable codes of the forwarding layer; the HTTP status travels with each UisError. */
export const ProxyErrorCode = {
  bodyTooLarge: 'body_too_large',
  invalidJson: 'invalid_json',
  invalidBody: 'invalid_body',
  engineTimeout: 'engine_timeout',
  engineUnreachable: 'engine_unreachable',
  engineResponseIncomplete: 'engine_response_incomplete',
  /** The engine's answer was not valid HTTP/1.1 (bad status line, headers or chunk framing). */
  engineBadResponse: 'engine_bad_response',
  noTarget: 'no_target',
  internal: 'internal_error',
} as const;
export type ProxyErrorCode = (typeof ProxyErrorCode)[keyof typeof ProxyErrorCode];

/** How a route spells its errors: the product's `{"error": {code, message, path?, details?}}` by default; OpenAI
 * routes add OpenAI's fields (see `openAIErrorBody`). */
export type ErrorBodyOf = (err: UisError) => unknown;

/** Writes the error body with the error's status unless the response has already started. */
export function sendError(
  res: ServerResponse,
  err: UisError,
  requestId: string | undefined,
  bodyOf?: ErrorBodyOf,
): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(bodyOf === undefined ? err.toJSON() : bodyOf(err));
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  };
  if (requestId !== undefined) headers['x-request-id'] = requestId;
  res.writeHead(err.status, headers);
  res.end(body);
}

/** Any thrown value as a UisError, so an unexpected failure still answers with the product's error shape. */
export function asUisError(e: unknown): UisError {
  if (e instanceof UisError) return e;
  return new UisError({
    code: ProxyErrorCode.internal,
    message: e instanceof Error ? e.message : String(e),
    cause: e,
  });
}

/** A Hono answer with the error's JSON and its status (the error table's). */
export function errorJson(c: Context, err: UisError): Response {
  return c.json(err.toJSON(), err.status as ContentfulStatusCode);
}

/** What the server answered on a connection by itself, outside any route (node's parser refusals: a request cut at
 * the body deadline is answered 408 on its socket), so the route reading that request's body reports the status the
 * client got instead of the bare `aborted` its cut body raises. */
const socketAnswers = new WeakMap<Socket, UisError>();

export function answeredOnSocket(socket: Socket, err: UisError): void {
  socketAnswers.set(socket, err);
}

/** The error the server answered on `socket` by itself, if it did. */
export function socketAnswer(socket: Socket): UisError | undefined {
  return socketAnswers.get(socket);
}
