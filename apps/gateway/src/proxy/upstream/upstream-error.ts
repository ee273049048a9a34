/** How the engine wire client fails, and which failures mean the engine never produced a response. */

export type UpstreamErrorCode =
  | 'UPSTREAM_CONNECT_TIMEOUT'
  | 'UPSTREAM_HEADERS_TIMEOUT'
  | 'UPSTREAM_BODY_TIMEOUT'
  /** The engine closed the connection before its answer ended. */
  | 'UPSTREAM_CLOSED'
  /** The pool was closed, or the engine removed, while the request ran. */
  | 'UPSTREAM_DESTROYED';

export class UpstreamError extends Error {
  readonly code: UpstreamErrorCode;
  constructor(code: UpstreamErrorCode, message: string) {
    super(message);
    this.name = 'UpstreamError';
    this.code = code;
  }
}

/** Socket errors and our own codes that mean the engine never produced a response: worth one try elsewhere. */
export const UNREACHABLE_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'UPSTREAM_CONNECT_TIMEOUT',
  'UPSTREAM_CLOSED',
  'UPSTREAM_DESTROYED',
]);
export const TIMEOUT_CODES: ReadonlySet<string> = new Set([
  'UPSTREAM_HEADERS_TIMEOUT',
  'UPSTREAM_BODY_TIMEOUT',
]);

/** The `code` of an error, when it has a string one (socket errors, UpstreamError, ProtocolError). */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
