import { type ErrorCode, formatPath, UisError } from '@uis/spec';
import type { z } from 'zod';

/** Stable codes of every way a call to an engine can fail (their statuses are in the error-code table). */
export type EngineErrorCode = Extract<
  ErrorCode,
  | 'engine_unreachable'
  | 'engine_timeout'
  | 'engine_http_error'
  | 'engine_bad_response'
  | 'engine_stream_error'
  | 'engine_refused'
  | 'engine_aborted'
>;

export interface EngineErrorInit {
  code: EngineErrorCode;
  message: string;
  /** `POST http://host:port/generate` */
  endpoint: string;
  /** For engine_http_error: the engine's status; 4xx answers keep their status so a gateway can pass them on. */
  engineStatus?: number;
  /** For engine_http_error: the engine's body (truncated). */
  body?: string;
  path?: string;
  details?: unknown;
  cause?: unknown;
}

/** A failed call to an SGLang engine (or router), as a value with a stable code. */
export class EngineError extends UisError {
  override readonly code: EngineErrorCode;
  readonly endpoint: string;
  readonly engineStatus: number | undefined;
  readonly body: string | undefined;

  constructor(init: EngineErrorInit) {
    super({
      code: init.code,
      // An engine's 4xx means it refused what was sent: passed on, so a gateway can answer with it.
      relayedStatus:
        init.engineStatus !== undefined && init.engineStatus < 500 ? init.engineStatus : undefined,
      message: `${init.endpoint}: ${init.message}`,
      path: init.path,
      details: init.details,
      cause: init.cause,
    });
    this.name = 'EngineError';
    this.code = init.code;
    this.endpoint = init.endpoint;
    this.engineStatus = init.engineStatus;
    this.body = init.body;
  }
}

export function isEngineError(e: unknown, code?: EngineErrorCode): e is EngineError {
  return e instanceof EngineError && (code === undefined || e.code === code);
}

/** A schema mismatch of an engine answer, naming the first wrong field (`response.meta_info.id`). */
export function badResponse(endpoint: string, error: z.ZodError, root = 'response'): EngineError {
  const first = error.issues[0];
  const path = first ? formatPath(first.path, root) || root : root;
  return new EngineError({
    code: 'engine_bad_response',
    endpoint,
    path,
    message: `answer does not match the SGLang protocol at ${path}: ${first?.message ?? 'invalid'}`,
    details: error.issues.map((i) => ({ path: formatPath(i.path, root) || root, message: i.message })),
  });
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

function errCode(e: unknown): string | undefined {
  if (typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string') return e.code;
  return undefined;
}

/** Maps a transport failure (undici / socket / abort) to an EngineError. `timedOut` says whether our own
 * deadline fired; `cancelled` whether the caller's signal did. `midStream` distinguishes a broken stream from
 * an engine that could not be reached at all. */
export function transportError(
  endpoint: string,
  e: unknown,
  state: { timedOut: boolean; cancelled: boolean; midStream: boolean; timeoutMs?: number | undefined },
): EngineError {
  if (e instanceof EngineError) return e;
  const code = errCode(e);
  const msg = e instanceof Error ? e.message : String(e);
  if (state.timedOut || (code !== undefined && TIMEOUT_CODES.has(code))) {
    const what = state.timedOut ? `no complete answer within ${state.timeoutMs} ms` : `${code}: ${msg}`;
    return new EngineError({ code: 'engine_timeout', endpoint, message: what, cause: e });
  }
  if (state.cancelled) {
    return new EngineError({
      code: 'engine_aborted',
      endpoint,
      message: 'cancelled by the caller',
      cause: e,
    });
  }
  if (state.midStream) {
    return new EngineError({
      code: 'engine_stream_error',
      endpoint,
      message: `stream broke: ${code ?? ''} ${msg}`.trim(),
      cause: e,
    });
  }
  return new EngineError({
    code: 'engine_unreachable',
    endpoint,
    message: `cannot reach the engine: ${code ?? ''} ${msg}`.trim(),
    cause: e,
  });
}
