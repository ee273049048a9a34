import { completionsHandler } from './completions-route.ts';
import { controlHandlers } from './control-routes.ts';
import type { SimEngine } from './engine.ts';
import { specFromSampling } from './generate.ts';
import { chatHandler, generateHandler } from './generation-routes.ts';
import { sendEmpty, sendJson } from './http-util.ts';
import type { SimOptions } from './options.ts';
import { type Handler, type RouteContext, routeContext } from './route-context.ts';

/** The version string the simulator reports (SGLang's `version` field). */
export const SIM_VERSION = '0.5.0-sim';

export type { Handler } from './route-context.ts';

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Non-zero node ranks serve only a stub /health, as SGLang does. */
export function workerHandler(engine: SimEngine): Handler {
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/health') return sendEmpty(res, engine.status === 'ready' ? 200 : 503);
    sendJson(res, 404, { detail: 'Not Found' });
  };
}

/** `/health` and `/health_generate`: the latter runs a real one-token generation through the scheduler. */
function healthHandler(ctx: RouteContext, generateCheck: boolean): Handler {
  const { engine, options, defaults, hang } = ctx;
  return async (_req, res) => {
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
}

/** SGLang's model and server info, and the OpenAI model list. */
function infoHandlers(ctx: RouteContext) {
  const { engine, options, created } = ctx;
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

  return { modelInfo, serverInfo, models };
}

export function headHandler(engine: SimEngine, options: SimOptions): Handler {
  const ctx = routeContext(engine, options);
  const { created } = ctx;
  const generate = generateHandler(ctx);
  const chat = chatHandler(ctx);
  const completions: Handler = completionsHandler(ctx);
  const health = (generateCheck: boolean) => healthHandler(ctx, generateCheck);
  const { modelInfo, serverInfo, models } = infoHandlers(ctx);
  const {
    flush,
    abort,
    pause,
    resume,
    memory,
    fromDisk,
    initGroup,
    destroyGroup,
    fromDistributed,
    fromTensor,
    weightVersion,
  } = controlHandlers(ctx);

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
