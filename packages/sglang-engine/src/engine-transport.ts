import { sseData } from '@uis/spec';
import { type Dispatcher, Pool } from 'undici';
import type { z } from 'zod';
import { badResponse, EngineError, isEngineError, transportError } from './engine-error.ts';
import { OpenAIErrorSchema, SGLangErrorSchema, SSE_DONE } from './protocol.ts';

export interface ClientTimeouts {
  /** TCP connect. Default 10 s. */
  connectMs?: number;
  /** Time to the response headers; generations can queue for long. Default 1 h. */
  headersMs?: number;
  /** Longest silence between two body chunks (a stream token gap). Default 1 h. */
  bodyMs?: number;
}

export interface SGLangClientOptions {
  /** Shared dispatcher (e.g. an Agent for many engines); the client then does not close it. */
  dispatcher?: Dispatcher;
  timeouts?: ClientTimeouts;
  /** Keep-alive connections per engine. Default 64. */
  connections?: number;
  /** The key the engine was started with (SGLang `--api-key`), sent as the bearer token of every call. */
  apiKey?: string;
}

/** Per-call limits. */
export interface CallOptions {
  /** Whole-call deadline (for a stream: until the last chunk). */
  timeoutMs?: number;
  /** Overrides the client's headers and body (idle) timeouts for this call. */
  idleTimeoutMs?: number;
  signal?: AbortSignal;
}

const DEFAULT_TIMEOUTS: Required<ClientTimeouts> = {
  connectMs: 10_000,
  headersMs: 3_600_000,
  bodyMs: 3_600_000,
};
const MAX_ERROR_BODY = 8192;

type Method = 'GET' | 'POST' | 'DELETE' | 'PUT';

/** One opened call: the undici answer plus the state its error mapping needs. */
interface Opened {
  res: Dispatcher.ResponseData;
  endpoint: string;
  state: { timedOut: boolean; cancelled: boolean; midStream: boolean; timeoutMs: number | undefined };
  dispose: () => void;
}

/** The wire layer of `SGLangClient`: one keep-alive pool, endpoint-name fallback, JSON and SSE reading, and the
 * mapping of every failure to an `EngineError` with a stable code. */
export class EngineTransport {
  readonly baseUrl: string;
  readonly dispatcher: Dispatcher;
  readonly ownsDispatcher: boolean;
  readonly timeouts: Required<ClientTimeouts>;
  /** Which of the old/new endpoint names this engine answers, learnt on first use. */
  readonly resolved = new Map<string, string>();
  private readonly auth: Record<string, string>;

  constructor(baseUrl: string, opts: SGLangClientOptions = {}) {
    const url = new URL(baseUrl);
    this.baseUrl = url.origin;
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
    this.auth = opts.apiKey === undefined ? {} : { authorization: `Bearer ${opts.apiKey}` };
    if (opts.dispatcher) {
      this.dispatcher = opts.dispatcher;
      this.ownsDispatcher = false;
    } else {
      this.dispatcher = new Pool(this.baseUrl, {
        connections: opts.connections ?? 64,
        connectTimeout: this.timeouts.connectMs,
        headersTimeout: this.timeouts.headersMs,
        bodyTimeout: this.timeouts.bodyMs,
        keepAliveTimeout: 30_000,
      });
      this.ownsDispatcher = true;
    }
  }

  /** Closes the pool (in-flight calls are cut). */
  /** Closes the pool (in-flight calls are cut). */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.destroy();
  }

  async probe(path: string, opts?: CallOptions): Promise<boolean> {
    try {
      await this.send('GET', path, undefined, opts);
      return true;
    } catch (e) {
      if (isEngineError(e, 'engine_http_error') && (e.engineStatus ?? 0) >= 500) return false;
      throw e;
    }
  }

  async withFallback<S extends z.ZodType>(paths: string[], schema: S, opts?: CallOptions) {
    const key = paths[0]!;
    const known = this.resolved.get(key);
    const order = known ? [known, ...paths.filter((p) => p !== known)] : paths;
    let last: unknown;
    for (const path of order) {
      try {
        const out: z.infer<S> = await this.json('GET', path, schema, undefined, opts);
        this.resolved.set(key, path);
        return out;
      } catch (e) {
        if (!isEngineError(e, 'engine_http_error') || e.engineStatus !== 404) throw e;
        last = e;
      }
    }
    throw last;
  }

  /** Sends a request and returns the status, draining the body; a status outside 2xx and `accept` throws. */
  async send(
    method: Method,
    path: string,
    body: unknown,
    opts?: CallOptions,
    accept: number[] = [],
  ): Promise<number> {
    const call = await this.open(method, path, body, opts);
    try {
      if (call.res.statusCode >= 300 && !accept.includes(call.res.statusCode)) {
        throw await this.httpError(call);
      }
      const text = await this.readText(call);
      // These endpoints answer an empty or free-form body; one that says it failed must not pass as done (a
      // release counted as freed memory that is still held).
      const refusal = call.res.statusCode < 300 ? refusalMessage(text) : undefined;
      if (refusal !== undefined) {
        throw new EngineError({
          code: 'engine_refused',
          endpoint: call.endpoint,
          path: 'response.success',
          body: text.slice(0, MAX_ERROR_BODY),
          message: `engine answered ${call.res.statusCode} with success false: ${refusal}`,
        });
      }
      return call.res.statusCode;
    } finally {
      call.dispose();
    }
  }

  async json<S extends z.ZodType>(
    method: Method,
    path: string,
    schema: S,
    body: unknown,
    opts?: CallOptions,
    accept: number[] = [],
  ): Promise<z.infer<S>> {
    const call = await this.open(method, path, body, opts);
    try {
      if (call.res.statusCode >= 300 && !accept.includes(call.res.statusCode)) {
        throw await this.httpError(call);
      }
      const text = await this.readText(call);
      // An accepted error status (a weight endpoint's 400) is a value only when its body is the protocol's
      // answer; anything else there (an HTML page, `{"error": ...}`) is the HTTP error it looks like.
      const accepted = call.res.statusCode >= 300;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        if (accepted) throw this.httpErrorOf(call, text);
        throw new EngineError({
          code: 'engine_bad_response',
          endpoint: call.endpoint,
          path: 'response',
          message: `answer is not JSON: ${text.slice(0, 200)}`,
        });
      }
      const parsed = schema.safeParse(value);
      if (!parsed.success)
        throw accepted ? this.httpErrorOf(call, text) : badResponse(call.endpoint, parsed.error);
      return parsed.data;
    } finally {
      call.dispose();
    }
  }

  async *stream<S extends z.ZodType>(
    path: string,
    schema: S,
    body: unknown,
    opts?: CallOptions,
  ): AsyncGenerator<z.infer<S>> {
    const call = await this.open('POST', path, body, opts);
    let done = false;
    try {
      if (call.res.statusCode >= 300) throw await this.httpError(call);
      const type = String(call.res.headers['content-type'] ?? '');
      if (!type.includes('text/event-stream')) {
        throw new EngineError({
          code: 'engine_bad_response',
          endpoint: call.endpoint,
          path: 'response.headers.content-type',
          message: `expected text/event-stream, got "${type}"`,
        });
      }
      call.state.midStream = true;
      let index = 0;
      try {
        for await (const data of sseData(call.res.body)) {
          if (data.trim() === SSE_DONE) {
            done = true;
            break;
          }
          const value = this.parseEvent(call.endpoint, data, index);
          // Cheap key test first: the error schema runs only on events that look like one.
          const failure = isErrorEvent(value) ? SGLangErrorSchema.safeParse(value) : undefined;
          if (failure?.success) {
            throw new EngineError({
              code: 'engine_stream_error',
              endpoint: call.endpoint,
              message: `engine reported an error mid-stream: ${failure.data.error.message}`,
              details: failure.data.error,
            });
          }
          const parsed = schema.safeParse(value);
          if (!parsed.success) throw badResponse(call.endpoint, parsed.error, `stream[${index}]`);
          index++;
          yield parsed.data;
        }
      } catch (e) {
        throw transportError(call.endpoint, e, call.state);
      }
      if (!done) {
        throw new EngineError({
          code: 'engine_stream_error',
          endpoint: call.endpoint,
          message: `stream ended after ${index} chunks without [DONE] (engine died or cut the connection)`,
        });
      }
    } finally {
      if (!done) {
        // Closing the connection is how SGLang learns to abort the request; the resulting stream error is ours.
        call.res.body.on('error', () => {});
        call.res.body.destroy();
      }
      call.dispose();
    }
  }

  parseEvent(endpoint: string, data: string, index: number): unknown {
    try {
      return JSON.parse(data);
    } catch {
      throw new EngineError({
        code: 'engine_bad_response',
        endpoint,
        path: `stream[${index}]`,
        message: `stream event is not JSON: ${data.slice(0, 200)}`,
      });
    }
  }

  async open(method: Method, path: string, body: unknown, opts: CallOptions = {}): Promise<Opened> {
    const endpoint = `${method} ${this.baseUrl}${path}`;
    const state = { timedOut: false, cancelled: false, midStream: false, timeoutMs: opts.timeoutMs };
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    if (opts.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        state.timedOut = true;
        controller.abort(new Error(`timeout after ${opts.timeoutMs} ms`));
      }, opts.timeoutMs);
    }
    const onCancel = () => {
      state.cancelled = true;
      controller.abort(opts.signal?.reason);
    };
    if (opts.signal?.aborted) onCancel();
    else opts.signal?.addEventListener('abort', onCancel, { once: true });
    const dispose = () => {
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onCancel);
    };
    const request: Dispatcher.RequestOptions = {
      origin: this.baseUrl,
      path,
      method,
      signal: controller.signal,
      headers: body === undefined ? this.auth : { ...this.auth, 'content-type': 'application/json' },
    };
    if (body !== undefined) request.body = JSON.stringify(body);
    if (opts.idleTimeoutMs !== undefined) {
      request.headersTimeout = opts.idleTimeoutMs;
      request.bodyTimeout = opts.idleTimeoutMs;
    }
    try {
      const res = await this.dispatcher.request(request);
      return { res, endpoint, state, dispose };
    } catch (e) {
      dispose();
      throw transportError(endpoint, e, state);
    }
  }

  async readText(call: Opened): Promise<string> {
    try {
      return await call.res.body.text();
    } catch (e) {
      throw transportError(call.endpoint, e, { ...call.state, midStream: true });
    }
  }

  async httpError(call: Opened): Promise<EngineError> {
    let text = '';
    try {
      text = await call.res.body.text();
    } catch {
      // The status alone is the error; a body that fails to arrive adds nothing.
    }
    return this.httpErrorOf(call, text);
  }

  httpErrorOf(call: Opened, text: string): EngineError {
    const status = call.res.statusCode;
    return new EngineError({
      code: 'engine_http_error',
      endpoint: call.endpoint,
      engineStatus: status,
      body: text.slice(0, MAX_ERROR_BODY),
      message: `HTTP ${status}: ${errorMessage(text)}`,
    });
  }
}

/** The message of a body that says `success: false` (`{success: false, message}`), else undefined. */
function refusalMessage(text: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || !('success' in value) || value.success !== false)
    return undefined;
  return 'message' in value && typeof value.message === 'string' ? value.message : '(no message)';
}

function isErrorEvent(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    'error' in value &&
    !('meta_info' in value) &&
    !('choices' in value)
  );
}

/** The human part of an SGLang / OpenAI / FastAPI error body, else the raw text. */
function errorMessage(text: string): string {
  try {
    const value: unknown = JSON.parse(text);
    const sg = SGLangErrorSchema.safeParse(value);
    if (sg.success) return sg.data.error.message;
    const oa = OpenAIErrorSchema.safeParse(value);
    if (oa.success) return oa.data.message;
    if (typeof value === 'object' && value !== null && 'detail' in value) return String(value.detail);
  } catch {
    // Plain-text body (e.g. /flush_cache); shown as is.
  }
  return text.slice(0, 500) || '(empty body)';
}
