import { z } from 'zod';
import { EngineError, isEngineError } from './engine-error.ts';
import { type CallOptions, EngineTransport, type SGLangClientOptions } from './engine-transport.ts';
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
  LoadTotalSchema,
  type MemoryTag,
  type ModelInfo,
  ModelInfoSchema,
  type ModelList,
  ModelListSchema,
  type PauseMode,
  type ServerInfo,
  ServerInfoSchema,
  type StatusMessage,
  StatusMessageSchema,
  type SuccessMessage,
  SuccessMessageSchema,
  type UpdateWeightsFromDiskRequest,
  type UpdateWeightsFromDiskResponse,
  UpdateWeightsFromDiskResponseSchema,
  type UpdateWeightsFromDistributedRequest,
  type UpdateWeightsFromTensorRequest,
  type UpdateWeightVersionRequest,
  type UpdateWeightVersionResponse,
  UpdateWeightVersionResponseSchema,
  V1LoadsSchema,
  WeightVersionSchema,
} from './protocol.ts';

export type { CallOptions, ClientTimeouts, SGLangClientOptions } from './engine-transport.ts';

/** /get_load: per-rank entries, or one token total on engines before 0.5.6, read as one rank that is busy
 * (num_reqs 1) while any token is in use. */
const LoadAnswerSchema = z.preprocess((v) => {
  const total = LoadTotalSchema.safeParse(v);
  if (!total.success) return v;
  const { load } = total.data;
  return [{ dp_rank: null, num_reqs: load > 0 ? 1 : 0, num_waiting_reqs: 0, num_tokens: Math.round(load) }];
}, GetLoadResponseSchema);

export interface FlushOptions extends CallOptions {
  /** Keep retrying while the engine answers 400 (requests still running) until this many ms. Default 120 s,
   * Relax's deadline. */
  deadlineMs?: number;
  /** Pause between retries. Default 200 ms. */
  retryIntervalMs?: number;
  /** Consecutive connection failures that mean the engine is gone rather than briefly busy. Default 3. */
  maxConnectErrors?: number;
}

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Typed HTTP client of one SGLang engine: one keep-alive pool, every answer parsed by its protocol schema,
 * every failure an `EngineError` with a stable code. The wire layer lives in `EngineTransport`. */
export class SGLangClient {
  readonly baseUrl: string;
  private readonly http: EngineTransport;

  constructor(baseUrl: string, opts: SGLangClientOptions = {}) {
    this.http = new EngineTransport(baseUrl, opts);
    this.baseUrl = this.http.baseUrl;
  }

  async close(): Promise<void> {
    await this.http.close();
  }

  // ---- generation -------------------------------------------------------------------------------------------

  /** POST /generate for one prompt. */
  generate(req: GenerateReqInput, opts?: CallOptions): Promise<GenerateResponse> {
    return this.http.json('POST', '/generate', GenerateResponseSchema, { ...req, stream: false }, opts);
  }

  /** POST /generate with a list of prompts (text[] or input_ids[][]): one answer per prompt, in order. */
  generateBatch(req: GenerateReqInput, opts?: CallOptions): Promise<GenerateBatchResponse> {
    return this.http.json('POST', '/generate', GenerateBatchResponseSchema, { ...req, stream: false }, opts);
  }

  /** POST /generate with `stream: true`: parsed chunks (cumulative text) until `[DONE]`. Breaking out of the
   * loop closes the connection, which makes SGLang abort the request. */
  generateStream(req: GenerateReqInput, opts?: CallOptions): AsyncGenerator<GenerateStreamChunk> {
    return this.http.stream('/generate', GenerateStreamChunkSchema, { ...req, stream: true }, opts);
  }

  /** POST /v1/chat/completions. */
  chatCompletions(req: ChatCompletionRequest, opts?: CallOptions): Promise<ChatCompletionResponse> {
    return this.http.json(
      'POST',
      '/v1/chat/completions',
      ChatCompletionResponseSchema,
      { ...req, stream: false },
      opts,
    );
  }

  /** POST /v1/chat/completions with `stream: true`. */
  chatCompletionsStream(req: ChatCompletionRequest, opts?: CallOptions): AsyncGenerator<ChatCompletionChunk> {
    return this.http.stream(
      '/v1/chat/completions',
      ChatCompletionChunkSchema,
      { ...req, stream: true },
      opts,
    );
  }

  /** POST /v1/completions (OpenAI text completions). */
  completions(req: CompletionRequest, opts?: CallOptions): Promise<CompletionResponse> {
    return this.http.json(
      'POST',
      '/v1/completions',
      CompletionResponseSchema,
      { ...req, stream: false },
      opts,
    );
  }

  // ---- info ---------------------------------------------------------------------------------------------------

  models(opts?: CallOptions): Promise<ModelList> {
    return this.http.json('GET', '/v1/models', ModelListSchema, undefined, opts);
  }

  /** GET /health: true on 200, false on a 5xx (starting, shutting down, stuck). Unreachable throws. */
  health(opts?: CallOptions): Promise<boolean> {
    return this.http.probe('/health', opts);
  }

  /** GET /health_generate: runs a one-token generation; true on 200, false on a 5xx. Unreachable throws. */
  healthGenerate(opts?: CallOptions): Promise<boolean> {
    return this.http.probe('/health_generate', opts);
  }

  /** GET /model_info, or /get_model_info on older engines. */
  modelInfo(opts?: CallOptions): Promise<ModelInfo> {
    return this.http.withFallback(['/model_info', '/get_model_info'], ModelInfoSchema, opts);
  }

  /** GET /server_info, or /get_server_info on older engines. */
  serverInfo(opts?: CallOptions): Promise<ServerInfo> {
    return this.http.withFallback(['/server_info', '/get_server_info'], ServerInfoSchema, opts);
  }

  /** The engine's weight version: GET /get_weight_version, or the `weight_version` of model info on engines
   * that dropped that endpoint. */
  async weightVersion(opts?: CallOptions): Promise<string | null> {
    if (this.http.resolved.get('weight_version') !== 'model_info') {
      try {
        const v = await this.http.json('GET', '/get_weight_version', WeightVersionSchema, undefined, opts);
        return v.weight_version;
      } catch (e) {
        if (!isEngineError(e, 'engine_http_error') || e.engineStatus !== 404) throw e;
        this.http.resolved.set('weight_version', 'model_info');
      }
    }
    return (await this.modelInfo(opts)).weight_version ?? null;
  }

  /** One entry per DP rank; `num_reqs` counts running and waiting requests. GET /get_load, or GET /v1/loads on
   * engines that dropped it (0.5.23), read as SGLang's own /get_load shim reads it (num_reqs = running +
   * waiting, num_tokens = num_total_tokens, or num_used_tokens where an entry has no total). An engine before
   * 0.5.6 answers one token total (see
   * LoadAnswerSchema). */
  async load(opts?: CallOptions): Promise<LoadEntry[]> {
    if (this.http.resolved.get('load') !== '/v1/loads') {
      try {
        return await this.http.json('GET', '/get_load', LoadAnswerSchema, undefined, opts);
      } catch (e) {
        if (!isEngineError(e, 'engine_http_error') || e.engineStatus !== 404) throw e;
        this.http.resolved.set('load', '/v1/loads');
      }
    }
    const v = await this.http.json('GET', '/v1/loads', V1LoadsSchema, undefined, opts);
    return v.loads.map((l) => ({
      dp_rank: l.dp_rank,
      num_reqs: l.num_running_reqs + l.num_waiting_reqs,
      num_waiting_reqs: l.num_waiting_reqs,
      num_tokens: l.num_total_tokens ?? l.num_used_tokens,
    }));
  }

  // ---- control ------------------------------------------------------------------------------------------------

  /** One POST /flush_cache: true when flushed, false when the engine refused because requests are running. */
  async flushCacheOnce(opts?: CallOptions): Promise<boolean> {
    const status = await this.http.send('POST', '/flush_cache', undefined, opts, [400]);
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
    // Once the engine has said "busy", running out of time is reported as that, whichever way the time ran out:
    // between attempts, or in a last attempt squeezed into what was left of the deadline.
    const stillBusy = (last?: string) =>
      new EngineError({
        code: 'engine_timeout',
        endpoint: `POST ${this.baseUrl}/flush_cache`,
        message: `still busy (400: requests running) after ${attempts} attempts in ${Date.now() - start} ms${last ? `; the last attempt: ${last}` : ''}`,
      });
    for (;;) {
      attempts++;
      // One attempt never outlives the deadline: a silent engine must not hold the caller for the pool's 1 h.
      const left = Math.max(1, deadlineMs - (Date.now() - start));
      const timeoutMs = Math.min(opts.timeoutMs ?? left, left);
      try {
        if (await this.flushCacheOnce({ ...opts, timeoutMs })) return;
        connectErrors = 0;
      } catch (e) {
        if (attempts > 1 && timeoutMs === left && isEngineError(e, 'engine_timeout'))
          throw stillBusy((e as Error).message);
        if (!isEngineError(e, 'engine_unreachable') || ++connectErrors >= maxConnectErrors) throw e;
      }
      if (Date.now() - start + interval > deadlineMs) throw stillBusy();
      await delay(interval);
    }
  }

  /** POST /abort_request for one request id. */
  async abortRequest(rid: string, opts?: CallOptions): Promise<void> {
    await this.http.send('POST', '/abort_request', { rid }, opts);
  }

  /** POST /abort_request with `abort_all`. */
  async abortAll(opts?: CallOptions): Promise<void> {
    await this.http.send('POST', '/abort_request', { abort_all: true }, opts);
  }

  /** POST /pause_generation: abort drops running requests, retract re-queues them, in_place freezes them. */
  pauseGeneration(mode: PauseMode, opts?: CallOptions): Promise<StatusMessage> {
    return this.http.json('POST', '/pause_generation', StatusMessageSchema, { mode }, opts);
  }

  continueGeneration(opts?: CallOptions): Promise<StatusMessage> {
    return this.http.json('POST', '/continue_generation', StatusMessageSchema, {}, opts);
  }

  /** POST /release_memory_occupation; `tags` absent = everything. Needs `--enable-memory-saver`. */
  async releaseMemoryOccupation(tags?: readonly MemoryTag[], opts?: CallOptions): Promise<void> {
    await this.http.send('POST', '/release_memory_occupation', { tags: tags ?? null }, opts);
  }

  /** POST /resume_memory_occupation; `tags` absent = everything. */
  async resumeMemoryOccupation(tags?: readonly MemoryTag[], opts?: CallOptions): Promise<void> {
    await this.http.send('POST', '/resume_memory_occupation', { tags: tags ?? null }, opts);
  }

  /** POST /update_weights_from_disk. SGLang answers a failed load with 400 and the same `{success: false}` body,
   * which is returned, not thrown. */
  updateWeightsFromDisk(
    req: UpdateWeightsFromDiskRequest,
    opts?: CallOptions,
  ): Promise<UpdateWeightsFromDiskResponse> {
    return this.http.json(
      'POST',
      '/update_weights_from_disk',
      UpdateWeightsFromDiskResponseSchema,
      req,
      opts,
      [400],
    );
  }

  initWeightsUpdateGroup(req: InitWeightsUpdateGroupRequest, opts?: CallOptions): Promise<SuccessMessage> {
    return this.http.json('POST', '/init_weights_update_group', SuccessMessageSchema, req, opts, [400]);
  }

  destroyWeightsUpdateGroup(
    req: DestroyWeightsUpdateGroupRequest,
    opts?: CallOptions,
  ): Promise<SuccessMessage> {
    return this.http.json('POST', '/destroy_weights_update_group', SuccessMessageSchema, req, opts, [400]);
  }

  updateWeightsFromDistributed(
    req: UpdateWeightsFromDistributedRequest,
    opts?: CallOptions,
  ): Promise<SuccessMessage> {
    return this.http.json('POST', '/update_weights_from_distributed', SuccessMessageSchema, req, opts, [400]);
  }

  /** POST /update_weights_from_tensor; a failed load answers 400 `{success: false}`, returned, not thrown. */
  updateWeightsFromTensor(req: UpdateWeightsFromTensorRequest, opts?: CallOptions): Promise<SuccessMessage> {
    return this.http.json('POST', '/update_weights_from_tensor', SuccessMessageSchema, req, opts, [400]);
  }

  updateWeightVersion(
    req: UpdateWeightVersionRequest,
    opts?: CallOptions,
  ): Promise<UpdateWeightVersionResponse> {
    return this.http.json(
      'POST',
      '/update_weight_version',
      UpdateWeightVersionResponseSchema,
      req,
      opts,
      [400],
    );
  }
}
