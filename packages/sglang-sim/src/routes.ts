import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  AbortRequestSchema,
  ChatCompletionRequestSchema,
  DEFAULT_WEIGHT_UPDATE_GROUP,
  DestroyWeightsUpdateGroupRequestSchema,
  FLUSH_CACHE_TEXT,
  GenerateReqInputSchema,
  InitWeightsUpdateGroupRequestSchema,
  MemoryOccupationRequestSchema,
  PauseGenerationRequestSchema,
  UpdateWeightsFromDiskRequestSchema,
  UpdateWeightsFromDistributedRequestSchema,
  UpdateWeightsFromTensorRequestSchema,
  UpdateWeightVersionRequestSchema,
} from '@uis/sglang-engine';
import type { z } from 'zod';
import { chatChunk, chatResponse, chatSampling, renderChatTemplate, usageOf } from './chat.ts';
import { completionsHandler } from './completions-route.ts';
import { type SimEngine, SimFailure } from './engine.ts';
import { type Defaults, generateResponse, specFromSampling, specsFromGenerate } from './generate.ts';
import { hashString } from './hash.ts';
import {
  BadJson,
  readJson,
  readOpenAIBody,
  sendEmpty,
  sendJson,
  sendOpenAIError,
  sendSGLangError,
  sendText,
  sendValidation,
  sseData,
  sseDone,
  startSse,
} from './http-util.ts';
import type { SimOptions } from './options.ts';
import type { SimSequence } from './request.ts';
import { encode } from './tokenizer.ts';

/** The version string the simulator reports (SGLang's `version` field). */
export const SIM_VERSION = '0.5.0-sim';

export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Non-zero node ranks serve only a stub /health, as SGLang does. */
export function workerHandler(engine: SimEngine): Handler {
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/health') return sendEmpty(res, engine.status === 'ready' ? 200 : 503);
    sendJson(res, 404, { detail: 'Not Found' });
  };
}

export function headHandler(engine: SimEngine, options: SimOptions): Handler {
  let ridCounter = 0;
  const ridPrefix = hashString(`${process.pid}:${Date.now()}`).toString(16);
  const defaults: Defaults = {
    seed: options.simSeed,
    dpSize: options.dpSize,
    nextRid: () => `${ridPrefix}${(ridCounter++).toString(16).padStart(8, '0')}`,
  };
  /** A hung engine never answers: the response is left open until the client gives up or the server closes. */
  const hang = (_res: ServerResponse): void => undefined;
  const created = () => Math.floor(Date.now() / 1000);
  /** SGLang's --stream-interval: one chunk every N tokens (and always the last one). */
  const interval = options.streamInterval;

  async function body<T extends z.ZodType>(
    req: IncomingMessage,
    res: ServerResponse,
    schema: T,
  ): Promise<z.infer<T> | undefined> {
    let raw: unknown;
    try {
      raw = await readJson(req);
    } catch (e) {
      if (!(e instanceof BadJson)) throw e;
      sendJson(res, 422, {
        detail: [{ type: 'json_invalid', loc: ['body'], msg: `JSON decode error: ${e.message}` }],
      });
      return undefined;
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      sendValidation(res, parsed.error);
      return undefined;
    }
    return parsed.data;
  }

  /** The common gate of generation endpoints; returns false when it already answered. */
  function gate(res: ServerResponse, openai: boolean): boolean {
    if (engine.status !== 'ready') {
      const msg = `The engine is ${engine.status}.`;
      if (openai) sendOpenAIError(res, 503, msg);
      else sendSGLangError(res, msg, 503);
      return false;
    }
    const a = engine.admit();
    if (a === 'hang') {
      hang(res);
      return false;
    }
    if (a === 'error') {
      const msg = 'Internal server error (injected by --sim-error-rate).';
      if (openai) sendOpenAIError(res, 500, msg);
      else sendSGLangError(res, msg, 500);
      return false;
    }
    return true;
  }

  function failure(res: ServerResponse, e: unknown, openai: boolean): void {
    if (!(e instanceof SimFailure)) throw e;
    engine.countError();
    if (openai) sendOpenAIError(res, e.status, e.message);
    else sendSGLangError(res, e.message, e.status);
  }

  const generate: Handler = async (req, res) => {
    const input = await body(req, res, GenerateReqInputSchema);
    if (!input || !gate(res, false)) return;
    let seqs: SimSequence[];
    let batch: boolean;
    const stream = input.stream === true;
    let remaining = 0;
    const finish = () => {
      if (--remaining > 0) return;
      if (stream) sseDone(res);
      else {
        const out = seqs.map((s) => generateResponse(s, engine.weightVersion, engine.now()));
        sendJson(res, 200, batch ? out : out[0]);
      }
    };
    try {
      engine.assertCanGenerate();
      const parsed = specsFromGenerate(input, defaults);
      batch = parsed.batch;
      remaining = parsed.specs.length;
      for (const spec of parsed.specs) engine.check(spec);
      if (stream) startSse(res);
      seqs = [];
      parsed.specs.forEach((spec, i) => {
        const index = batch ? i : undefined;
        const onProgress = stream
          ? (s: SimSequence) => {
              if (s.outputIds.length % interval === 0) {
                sseData(res, generateResponse(s, engine.weightVersion, engine.now(), index));
              }
            }
          : () => {};
        const onDone = (s: SimSequence) => {
          if (stream) sseData(res, generateResponse(s, engine.weightVersion, engine.now(), index));
          finish();
        };
        seqs.push(engine.start(spec, onProgress, onDone));
      });
    } catch (e) {
      return failure(res, e, false);
    }
    res.on('close', () => {
      for (const s of seqs) engine.drop(s);
    });
  };

  const chat: Handler = async (req, res) => {
    const r = await readOpenAIBody(req, res, ChatCompletionRequestSchema);
    if (r === undefined) return;
    if ((r.n ?? 1) !== 1) return sendOpenAIError(res, 400, 'The simulator supports n = 1 only.');
    if (!gate(res, true)) return;
    const wantLogprobs = r.logprobs === true;
    const top = r.top_logprobs ?? 0;
    const model = r.model;
    const ts = created();
    const prompt = renderChatTemplate(r.messages, r.chat_template_kwargs);
    let seq: SimSequence;
    try {
      engine.assertCanGenerate();
      const spec = specFromSampling(
        r.rid ?? `chatcmpl-${defaults.nextRid()}`,
        encode(prompt),
        chatSampling(r),
        {
          returnLogprob: wantLogprobs,
          topLogprobsNum: top,
        },
        defaults,
      );
      if (!r.stream) {
        seq = engine.start(
          spec,
          () => {},
          (s) => {
            const body = chatResponse(s, model, ts, wantLogprobs, top);
            (body.metadata as Record<string, unknown>).weight_version = engine.weightVersion;
            sendJson(res, 200, body);
          },
        );
      } else {
        let sentChars = 0;
        let sentTokens = 0;
        const push = (s: SimSequence) => {
          if (s.text.length <= sentChars || s.outputIds.length % interval !== 0) return;
          sseData(
            res,
            chatChunk(s, model, ts, { content: s.text.slice(sentChars) }, sentTokens, wantLogprobs, top),
          );
          sentChars = s.text.length;
          sentTokens = s.outputIds.length;
        };
        startSse(res);
        seq = engine.start(spec, push, (s) => {
          if (s.text.length > sentChars) {
            sseData(res, {
              ...chatChunk(s, model, ts, { content: s.text.slice(sentChars) }, sentTokens, wantLogprobs, top),
            });
            sentChars = s.text.length;
          }
          const last = chatChunk(s, model, ts, {}, s.outputIds.length, false, 0, true);
          sseData(res, last);
          if (r.stream_options?.include_usage) {
            sseData(res, {
              id: s.spec.rid,
              object: 'chat.completion.chunk',
              created: ts,
              model,
              choices: [],
              usage: usageOf(s),
            });
          }
          sseDone(res);
        });
        sseData(res, chatChunk(seq, model, ts, { role: 'assistant', content: '' }, 0, false, 0));
      }
    } catch (e) {
      return failure(res, e, true);
    }
    res.on('close', () => engine.drop(seq));
  };

  const completions: Handler = completionsHandler({ engine, defaults, interval, created, gate, failure });

  const health =
    (generateCheck: boolean): Handler =>
    async (_req, res) => {
      if (engine.status === 'hung') return hang(res);
      if (options.simSlowHealthMs > 0) await new Promise((r) => setTimeout(r, options.simSlowHealthMs));
      if (engine.status !== 'ready') return sendEmpty(res, 503);
      if (!generateCheck) return sendEmpty(res, 200);
      if (engine.scheduler.paused !== null) return sendEmpty(res, 503);
      try {
        engine.assertCanGenerate();
      } catch {
        return sendEmpty(res, 503);
      }
      // A real one-token generation through the scheduler, so an overloaded engine answers late.
      const spec = specFromSampling(
        `HEALTH_CHECK_${defaults.nextRid()}`,
        [3 + 72, 3 + 105],
        { max_new_tokens: 1, temperature: 0 },
        {},
        defaults,
      );
      const seq = engine.start(
        spec,
        () => {},
        (s) => sendEmpty(res, s.finishReason?.type === 'abort' ? 503 : 200),
      );
      res.on('close', () => engine.drop(seq));
    };

  const modelInfo: Handler = (_req, res) =>
    sendJson(res, 200, {
      model_path: engine.modelPath,
      tokenizer_path: options.tokenizerPath ?? engine.modelPath,
      is_generation: true,
      preferred_sampling_params: null,
      weight_version: engine.weightVersion,
    });

  const ranksPerNode = Math.max(1, Math.ceil((options.tpSize * options.ppSize) / options.nnodes));
  const serverInfo: Handler = (_req, res) => {
    const args: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(options)) args[snake(k)] = v ?? null;
    const st = engine.state();
    sendJson(res, 200, {
      ...args,
      model_path: engine.modelPath,
      served_model_name: engine.servedModelName,
      weight_version: engine.weightVersion,
      cuda_visible_devices: options.cudaVisibleDevices ?? null,
      gpu_ids: Array.from({ length: ranksPerNode }, (_, i) => options.baseGpuId + i * options.gpuIdStep),
      max_total_num_tokens: options.simKvCapacityTokens,
      max_running_requests: options.simMaxRunningRequests,
      max_req_input_len: options.contextLength - 1,
      internal_states: [
        {
          status: st.status,
          paused: st.paused,
          memory: st.memory,
          weights_valid: st.weightsValid,
          weight_update_groups: st.weightUpdateGroups,
          connected_nodes: st.connectedNodes,
          ...engine.stats(),
        },
      ],
      version: SIM_VERSION,
    });
  };

  const models: Handler = (_req, res) =>
    sendJson(res, 200, {
      object: 'list',
      data: [
        {
          id: engine.servedModelName,
          object: 'model',
          created: created(),
          owned_by: 'sglang',
          root: engine.servedModelName,
          max_model_len: options.contextLength,
        },
      ],
    });

  const flush: Handler = (_req, res) => sendText(res, engine.flushCache() ? 200 : 400, FLUSH_CACHE_TEXT);

  const abort: Handler = async (req, res) => {
    const b = await body(req, res, AbortRequestSchema);
    if (!b) return;
    engine.abort(b.rid, b.abort_all === true);
    sendEmpty(res, 200);
  };

  const pause: Handler = async (req, res) => {
    const b = await body(req, res, PauseGenerationRequestSchema);
    if (!b) return;
    engine.pause(b.mode ?? 'abort');
    sendJson(res, 200, { message: 'Generation paused successfully.', status: 'ok' });
  };

  const resume: Handler = (_req, res) => {
    engine.resumeGeneration();
    sendJson(res, 200, { message: 'Generation continued successfully.', status: 'ok' });
  };

  const memory =
    (release: boolean): Handler =>
    async (req, res) => {
      const b = await body(req, res, MemoryOccupationRequestSchema);
      if (!b) return;
      try {
        if (release) await engine.releaseMemory(b.tags);
        else await engine.resumeMemory(b.tags);
        // FastAPI answers a handler that returns None with 200 and a JSON `null`.
        sendJson(res, 200, null);
      } catch (e) {
        failure(res, e, false);
      }
    };

  const ok = (res: ServerResponse, message: string, extra: Record<string, unknown> = {}) =>
    sendJson(res, 200, { success: true, message, ...extra });
  const notOk = (res: ServerResponse, e: unknown, extra: Record<string, unknown> = {}) => {
    if (!(e instanceof SimFailure)) throw e;
    sendJson(res, 400, { success: false, message: e.message, ...extra });
  };
  const versionNote = (v: string | null | undefined) => (v ? ` Weight version updated to ${v}.` : '');

  /** A weights endpoint: parse the body, make the change, answer `{success: true, message}`; a change the engine
   * refuses is a 400 `{success: false, message}` with the reason, as SGLang answers it. */
  const weightCall =
    <T extends z.ZodType>(
      schema: T,
      change: (b: z.infer<T>) => unknown,
      message: (b: z.infer<T>) => string,
      extra: Record<string, unknown> = {},
    ): Handler =>
    async (req, res) => {
      const b = await body(req, res, schema);
      if (!b) return;
      try {
        await change(b);
        ok(res, message(b), extra);
      } catch (e) {
        notOk(res, e, extra);
      }
    };

  const fromDisk = weightCall(
    UpdateWeightsFromDiskRequestSchema,
    (b) => engine.updateWeightsFromDisk(b.model_path, b.weight_version, b.abort_all_requests),
    (b) => `Succeeded to update model weights.${versionNote(b.weight_version)}`,
    { num_paused_requests: 0 },
  );
  const initGroup = weightCall(
    InitWeightsUpdateGroupRequestSchema,
    (b) => engine.initGroup(b.group_name ?? DEFAULT_WEIGHT_UPDATE_GROUP),
    () => 'Succeeded to initialize custom process group.',
  );
  const destroyGroup = weightCall(
    DestroyWeightsUpdateGroupRequestSchema,
    (b) => engine.destroyGroup(b.group_name ?? DEFAULT_WEIGHT_UPDATE_GROUP),
    () => 'Succeeded to destroy custom process group.',
  );
  const fromDistributed = weightCall(
    UpdateWeightsFromDistributedRequestSchema,
    (b) =>
      engine.updateWeightsFromDistributed(
        b.group_name ?? DEFAULT_WEIGHT_UPDATE_GROUP,
        b.names,
        b.weight_version,
        b.abort_all_requests,
      ),
    (b) => `Succeeded to update parameter online.${versionNote(b.weight_version)}`,
  );
  const fromTensor = weightCall(
    UpdateWeightsFromTensorRequestSchema,
    (b) =>
      engine.updateWeightsFromTensor(
        b.serialized_named_tensors.length,
        b.weight_version,
        b.abort_all_requests,
      ),
    (b) => `Succeeded to update model weights.${versionNote(b.weight_version)}`,
  );

  const weightVersion: Handler = async (req, res) => {
    const b = await body(req, res, UpdateWeightVersionRequestSchema);
    if (!b) return;
    engine.setWeightVersion(b.new_version, b.abort_all_requests);
    ok(res, `Weight version updated to ${b.new_version}`, { new_version: b.new_version });
  };

  const routes = new Map<string, Handler>();
  const on = (methods: string, path: string, h: Handler) => {
    for (const m of methods.split(',')) routes.set(`${m} ${path}`, h);
  };
  on('POST,PUT', '/generate', generate);
  on('POST', '/v1/chat/completions', chat);
  on('POST', '/v1/completions', completions);
  on('GET', '/v1/models', models);
  on('GET', '/health', health(false));
  on('GET', '/health_generate', health(true));
  on('GET', '/get_model_info', modelInfo);
  on('GET', '/model_info', modelInfo);
  on('GET', '/get_server_info', serverInfo);
  on('GET', '/server_info', serverInfo);
  on('GET', '/get_weight_version', (_q, res) => sendJson(res, 200, { weight_version: engine.weightVersion }));
  on('GET', '/get_load', (_q, res) => sendJson(res, 200, engine.load()));
  // Simulator-only: cumulative counters, so tests can prove which engine a router sent work to (or that none came).
  on('GET', '/sim/stats', (_q, res) => sendJson(res, 200, engine.stats()));
  on('GET,POST', '/flush_cache', flush);
  on('POST', '/abort_request', abort);
  on('POST', '/pause_generation', pause);
  on('POST', '/continue_generation', resume);
  on('GET,POST', '/release_memory_occupation', memory(true));
  on('GET,POST', '/resume_memory_occupation', memory(false));
  on('POST', '/update_weights_from_disk', fromDisk);
  on('POST', '/init_weights_update_group', initGroup);
  on('POST', '/destroy_weights_update_group', destroyGroup);
  on('POST', '/update_weights_from_distributed', fromDistributed);
  on('POST', '/update_weights_from_tensor', fromTensor);
  on('POST', '/update_weight_version', weightVersion);

  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0] as string;
    const h = routes.get(`${req.method} ${path}`);
    if (h) return h(req, res);
    if (req.method === 'GET' && path.startsWith('/v1/models/')) {
      const id = decodeURIComponent(path.slice('/v1/models/'.length));
      if (id !== engine.servedModelName) {
        return sendJson(res, 404, {
          error: {
            message: `The model '${id}' does not exist`,
            type: 'invalid_request_error',
            param: 'model',
            code: 'model_not_found',
          },
        });
      }
      return sendJson(res, 200, {
        id,
        object: 'model',
        created: created(),
        owned_by: 'sglang',
        root: id,
        max_model_len: options.contextLength,
      });
    }
    const known = [...routes.keys()].some((k) => k.endsWith(` ${path}`));
    sendJson(res, known ? 405 : 404, { detail: known ? 'Method Not Allowed' : 'Not Found' });
  };
}
