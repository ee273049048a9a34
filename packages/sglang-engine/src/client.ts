import { sseData } from '@uis/spec';
import type { Dispatcher } from 'undici';
import { Pool } from 'undici';
import type { z } from 'zod';
import { badResponse, EngineError, isEngineError, transportError } from './engine-error.ts';
import {
  type ChatCompletionChunk,
  ChatCompletionChunkSchema,
  type ChatCompletionRequest,
  type ChatCompletionResponse,
  ChatCompletionResponseSchema,
  type CompletionRequest,
  type CompletionResponse,
  CompletionResponseSchema,
  type DestroyWeightsUpdateGroupRequest,
  type GenerateBatchResponse,
  GenerateBatchResponseSchema,
  type GenerateReqInput,
  type GenerateResponse,
  GenerateResponseSchema,
  type GenerateStreamChunk,
  GenerateStreamChunkSchema,
  GetLoadResponseSchema,
  type InitWeightsUpdateGroupRequest,
  type LoadEntry,
  type MemoryTag,
  type ModelInfo,
  ModelInfoSchema,
  type ModelList,
  ModelListSchema,
  OpenAIErrorSchema,
  type PauseMode,
  type ServerInfo,
  ServerInfoSchema,
  SGLangErrorSchema,
  SSE_DONE,
  type StatusMessage,
  StatusMessageSchema,
  type SuccessMessage,
  SuccessMessageSchema,
  type UpdateWeightsFromDiskRequest,
  type UpdateWeightsFromDiskResponse,
  UpdateWeightsFromDiskResponseSchema,
  type UpdateWeightsFromDistributedRequest,
  type UpdateWeightVersionRequest,
  type UpdateWeightVersionResponse,
  UpdateWeightVersionResponseSchema,
  WeightVersionSchema,
} from './protocol.ts';

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

export interface FlushOptions extends CallOptions {
  /** Keep retrying while the engine answers 400 (requests still running) until this many ms. Default 120 s,
   * Relax's deadline. */
  deadlineMs?: number;
  /** Pause between retries. Default 200 ms. */
  retryIntervalMs?: number;
  /** Consecutive connection failures that mean the engine is gone rather than briefly busy. Default 3. */
  maxConnectErrors?: number;
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

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Typed HTTP client of one SGLang engine: one keep-alive pool, every answer parsed by its protocol schema,
 * every failure an `EngineError` with a stable code. */
export class SGLangClient {
  readonly baseUrl: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly timeouts: Required<ClientTimeouts>;
  /** Which of the old/new endpoint names this engine answers, learnt on first use. */
  private readonly resolved = new Map<string, string>();
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
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.destroy();
  }

  // ---- generation -------------------------------------------------------------------------------------------

  /** POST /generate for one prompt. */
  generate(req: GenerateReqInput, opts?: CallOptions): Promise<GenerateResponse> {
    return this.json('POST', '/generate', GenerateResponseSchema, { ...req, stream: false }, opts);
  }

  /** POST /generate with a list of prompts (text[] or input_ids[][]): one answer per prompt, in order. */
  generateBatch(req: GenerateReqInput, opts?: CallOptions): Promise<GenerateBatchResponse> {
    return this.json('POST', '/generate', GenerateBatchResponseSchema, { ...req, stream: false }, opts);
  }

  /** POST /generate with `stream: true`: parsed chunks (cumulative text) until `[DONE]`. Breaking out of the
   * loop closes the connection, which makes SGLang abort the request. */
  generateStream(req: GenerateReqInput, opts?: CallOptions): AsyncGenerator<GenerateStreamChunk> {
    return this.stream('/generate', GenerateStreamChunkSchema, { ...req, stream: true }, opts);
  }

  /** POST /v1/chat/completions. */
  chatCompletions(req: ChatCompletionRequest, opts?: CallOptions): Promise<ChatCompletionResponse> {
    return this.json(
      'POST',
      '/v1/chat/completions',
      ChatCompletionResponseSchema,
      { ...req, stream: false },
      opts,
    );
  }

  /** POST /v1/chat/completions with `stream: true`. */
  chatCompletionsStream(req: ChatCompletionRequest, opts?: CallOptions): AsyncGenerator<ChatCompletionChunk> {
    return this.stream('/v1/chat/completions', ChatCompletionChunkSchema, { ...req, stream: true }, opts);
  }

  /** POST /v1/completions (OpenAI text completions). */
  completions(req: CompletionRequest, opts?: CallOptions): Promise<CompletionResponse> {
    return this.json('POST', '/v1/completions', CompletionResponseSchema, { ...req, stream: false }, opts);
  }

  // ---- info ---------------------------------------------------------------------------------------------------

  models(opts?: CallOptions): Promise<ModelList> {
    return this.json('GET', '/v1/models', ModelListSchema, undefined, opts);
  }

  /** GET /health: true on 200, false on a 5xx (starting, shutting down, stuck). Unreachable throws. */
  health(opts?: CallOptions): Promise<boolean> {
    return this.probe('/health', opts);
  }

  /** GET /health_generate: runs a one-token generation; true on 200, false on a 5xx. Unreachable throws. */
  healthGenerate(opts?: CallOptions): Promise<boolean> {
    return this.probe('/health_generate', opts);
  }

  /** GET /model_info, or /get_model_info on older engines. */
  modelInfo(opts?: CallOptions): Promise<ModelInfo> {
    return this.withFallback(['/model_info', '/get_model_info'], ModelInfoSchema, opts);
  }

  /** GET /server_info, or /get_server_info on older engines. */
  serverInfo(opts?: CallOptions): Promise<ServerInfo> {
    return this.withFallback(['/server_info', '/get_server_info'], ServerInfoSchema, opts);
  }

  /** The engine's weight version: GET /get_weight_version, or the `weight_version` of model info on engines
   * that dropped that endpoint. */
  async weightVersion(opts?: CallOptions): Promise<string | null> {
    if (this.resolved.get('weight_version') !== 'model_info') {
      try {
        const v = await this.json('GET', '/get_weight_version', WeightVersionSchema, undefined, opts);
        return v.weight_version;
      } catch (e) {
        if (!isEngineError(e, 'engine_http_error') || e.engineStatus !== 404) throw e;
        this.resolved.set('weight_version', 'model_info');
      }
    }
    return (await this.modelInfo(opts)).weight_version ?? null;
  }

  /** GET /get_load: one entry per DP rank. */
  load(opts?: CallOptions): Promise<LoadEntry[]> {
    return this.json('GET', '/get_load', GetLoadResponseSchema, undefined, opts);
  }

  // ---- control ------------------------------------------------------------------------------------------------

  /** One POST /flush_cache: true when flushed, false when the engine refused because requests are running. */
  async flushCacheOnce(opts?: CallOptions): Promise<boolean> {
    const status = await this.send('POST', '/flush_cache', undefined, opts, [400]);
    return status === 200;
  }

  /** POST /flush_cache, retried while it answers 400 (requests running) until `deadlineMs`; then
   * `engine_timeout`. */
  async flushCache(opts: FlushOptions = {}): Promise<void> {
    const deadlineMs = opts.deadlineMs ?? 120_000;
    const interval = opts.retryIntervalMs ?? 200;
    const maxConnectErrors = opts.maxConnectErrors ?? 3;
    const start = Date.now();
    let attempts = 0;
    let connectErrors = 0;
    for (;;) {
      attempts++;
      // One attempt never outlives the deadline: a silent engine must not hold the caller for the pool's 1 h.
      const left = Math.max(1, deadlineMs - (Date.now() - start));
      const timeoutMs = Math.min(opts.timeoutMs ?? left, left);
      try {
        if (await this.flushCacheOnce({ ...opts, timeoutMs })) return;
        connectErrors = 0;
      } catch (e) {
        if (!isEngineError(e, 'engine_unreachable') || ++connectErrors >= maxConnectErrors) throw e;
      }
      if (Date.now() - start + interval > deadlineMs) {
        throw new EngineError({
          code: 'engine_timeout',
          endpoint: `POST ${this.baseUrl}/flush_cache`,
          message: `still busy (400: requests running) after ${attempts} attempts in ${Date.now() - start} ms`,
        });
      }
      await delay(interval);
    }
  }

  /** POST /abort_request for one request id. */
  async abortRequest(rid: string, opts?: CallOptions): Promise<void> {
    await this.send('POST', '/abort_request', { rid }, opts);
  }

  /** POST /abort_request with `abort_all`. */
  async abortAll(opts?: CallOptions): Promise<void> {
    await this.send('POST', '/abort_request', { abort_all: true }, opts);
  }

  /** POST /pause_generation: abort drops running requests, retract re-queues them, in_place freezes them. */
  pauseGeneration(mode: PauseMode, opts?: CallOptions): Promise<StatusMessage> {
    return this.json('POST', '/pause_generation', StatusMessageSchema, { mode }, opts);
  }

  continueGeneration(opts?: CallOptions): Promise<StatusMessage> {
    return this.json('POST', '/continue_generation', StatusMessageSchema, {}, opts);
  }

  /** POST /release_memory_occupation; `tags` absent = everything. Needs `--enable-memory-saver`. */
  async releaseMemoryOccupation(tags?: readonly MemoryTag[], opts?: CallOptions): Promise<void> {
    await this.send('POST', '/release_memory_occupation', { tags: tags ?? null }, opts);
  }

  /** POST /resume_memory_occupation; `tags` absent = everything. */
  async resumeMemoryOccupation(tags?: readonly MemoryTag[], opts?: CallOptions): Promise<void> {
    await this.send('POST', '/resume_memory_occupation', { tags: tags ?? null }, opts);
  }

  /** POST /update_weights_from_disk. SGLang answers a failed load with 400 and the same `{success: false}` body,
   * which is returned, not thrown. */
  updateWeightsFromDisk(
    req: UpdateWeightsFromDiskRequest,
    opts?: CallOptions,
  ): Promise<UpdateWeightsFromDiskResponse> {
    return this.json(
      'POST',
      '/update_weights_from_disk',
      UpdateWeightsFromDiskResponseSchema,
      req,
      opts,
      [400],
    );
  }

  initWeightsUpdateGroup(req: InitWeightsUpdateGroupRequest, opts?: CallOptions): Promise<SuccessMessage> {
    return this.json('POST', '/init_weights_update_group', SuccessMessageSchema, req, opts, [400]);
  }

  destroyWeightsUpdateGroup(
    req: DestroyWeightsUpdateGroupRequest,
    opts?: CallOptions,
  ): Promise<SuccessMessage> {
    return this.json('POST', '/destroy_weights_update_group', SuccessMessageSchema, req, opts, [400]);
  }

  updateWeightsFromDistributed(
    req: UpdateWeightsFromDistributedRequest,
    opts?: CallOptions,
  ): Promise<SuccessMessage> {
    return this.json('POST', '/update_weights_from_distributed', SuccessMessageSchema, req, opts, [400]);
  }

  updateWeightVersion(
    req: UpdateWeightVersionRequest,
    opts?: CallOptions,
  ): Promise<UpdateWeightVersionResponse> {
    return this.json('POST', '/update_weight_version', UpdateWeightVersionResponseSchema, req, opts, [400]);
  }

  // ---- transport ----------------------------------------------------------------------------------------------

  private async probe(path: string, opts?: CallOptions): Promise<boolean> {
    try {
      await this.send('GET', path, undefined, opts);
      return true;
    } catch (e) {
      if (isEngineError(e, 'engine_http_error') && (e.engineStatus ?? 0) >= 500) return false;
      throw e;
    }
  }

  private async withFallback<S extends z.ZodType>(paths: string[], schema: S, opts?: CallOptions) {
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
  private async send(
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

  private async json<S extends z.ZodType>(
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

  private async *stream<S extends z.ZodType>(
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

  private parseEvent(endpoint: string, data: string, index: number): unknown {
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

  private async open(method: Method, path: string, body: unknown, opts: CallOptions = {}): Promise<Opened> {
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

  private async readText(call: Opened): Promise<string> {
    try {
      return await call.res.body.text();
    } catch (e) {
      throw transportError(call.endpoint, e, { ...call.state, midStream: true });
    }
  }

  private async httpError(call: Opened): Promise<EngineError> {
    let text = '';
    try {
      text = await call.res.body.text();
    } catch {
      // The status alone is the error; a body that fails to arrive adds nothing.
    }
    return this.httpErrorOf(call, text);
  }

  private httpErrorOf(call: Opened, text: string): EngineError {
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
