import { routeOf, surfaceOf } from '@uis/sglang-engine';
import { z } from 'zod';
import { completionsHandler } from './completions-route.ts';
import { controlHandlers } from './control-routes.ts';
import type { SimEngine } from './engine.ts';
import { specFromSampling } from './generate.ts';
import { chatHandler, generateHandler } from './generation-routes.ts';
import { sendEmpty, sendJson } from './http-util.ts';
import { metricsText } from './metrics.ts';
import type { SimOptions } from './options.ts';
import { type Handler, type RouteContext, routeContext } from './route-context.ts';

const SimFaultsSchema = z.strictObject({
  fail_weight_updates: z.number().int().nonnegative().optional(),
  hold_arrivals: z.boolean().optional(),
  break_at: z.strictObject({ rid: z.string().min(1), tokens: z.number().int().positive() }).optional(),
  unbreak: z.literal(true).optional(),
});

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
          ...(engine.bytes ? { memory_usage: engine.bytes.memoryUsage(options.simSglangVersion) } : {}),
          ...engine.stats(),
        },
      ],
      version: options.simSglangVersion,
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

/** The SGLang routes the simulator serves, with SGLang's methods (the conformance test holds them to every
 * release's surface); a simulated release serves those of them it has. */
export const SIM_ROUTES = [
  ['POST,PUT', '/generate'],
  ['POST', '/v1/chat/completions'],
  ['POST', '/v1/completions'],
  ['GET', '/v1/models'],
  ['GET', '/health'],
  ['GET', '/health_generate'],
  ['GET', '/get_model_info'],
  ['GET', '/model_info'],
  ['GET', '/get_server_info'],
  ['GET', '/server_info'],
  ['GET', '/get_weight_version'],
  ['GET', '/get_load'],
  ['GET', '/v1/loads'],
  ['GET,POST', '/flush_cache'],
  ['POST', '/abort_request'],
  ['POST', '/pause_generation'],
  ['POST', '/continue_generation'],
  ['GET,POST', '/release_memory_occupation'],
  ['GET,POST', '/resume_memory_occupation'],
  ['POST', '/update_weights_from_disk'],
  ['POST', '/init_weights_update_group'],
  ['POST', '/destroy_weights_update_group'],
  ['POST', '/update_weights_from_distributed'],
  ['POST', '/update_weights_from_tensor'],
  ['POST', '/update_weight_version'],
] as const;

/** GET /v1/loads: SGLang's per-DP-rank load snapshots (its /get_load counts `num_reqs` = running + waiting). */
/** One entry per DP rank, with the fields the release's entry has (0.5.9 and 0.5.10 have no num_total_tokens). */
function v1Loads(engine: SimEngine, version: string) {
  const fields = surfaceOf(version)?.answers['v1/loads.loads[]']?.fields ?? {};
  return {
    timestamp: new Date().toISOString(),
    version,
    accelerator: null,
    num_accelerators: 1,
    loads: engine.load().map((l) => ({
      dp_rank: l.dp_rank,
      num_running_reqs: l.num_reqs - l.num_waiting_reqs,
      num_waiting_reqs: l.num_waiting_reqs,
      num_used_tokens: l.num_tokens,
      ...('num_total_tokens' in fields ? { num_total_tokens: l.num_tokens } : {}),
    })),
  };
}

/** /get_load as the release answers it: one token total before 0.5.6 (`{load}`), else one entry per DP rank. */
function getLoad(engine: SimEngine, version: string) {
  const entry = surfaceOf(version)?.answers['get_load[]'];
  if (entry !== undefined && 'load' in entry.fields) {
    return { load: engine.load().reduce((n, l) => n + l.num_tokens, 0) };
  }
  return engine.load();
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

  const handlers: Record<(typeof SIM_ROUTES)[number][1], Handler> = {
    '/generate': generate,
    '/v1/chat/completions': chat,
    '/v1/completions': completions,
    '/v1/models': models,
    '/health': health(false),
    '/health_generate': health(true),
    '/get_model_info': modelInfo,
    '/model_info': modelInfo,
    '/get_server_info': serverInfo,
    '/server_info': serverInfo,
    '/get_weight_version': (_q, res) => sendJson(res, 200, { weight_version: engine.weightVersion }),
    '/get_load': (_q, res) => sendJson(res, 200, getLoad(engine, options.simSglangVersion)),
    '/v1/loads': (_q, res) => sendJson(res, 200, v1Loads(engine, options.simSglangVersion)),
    '/flush_cache': flush,
    '/abort_request': abort,
    '/pause_generation': pause,
    '/continue_generation': resume,
    '/release_memory_occupation': memory(true),
    '/resume_memory_occupation': memory(false),
    '/update_weights_from_disk': fromDisk,
    '/init_weights_update_group': initGroup,
    '/destroy_weights_update_group': destroyGroup,
    '/update_weights_from_distributed': fromDistributed,
    '/update_weights_from_tensor': fromTensor,
    '/update_weight_version': weightVersion,
  };
  const routes = new Map<string, Handler>();
  // Only what the simulated release serves: an older one has no /model_info, a newer one no /get_load, and
  // 0.5.9 to 0.5.17 keep /get_weight_version only to answer 404 (routeOf leaves such a route out).
  const surface = surfaceOf(options.simSglangVersion);
  for (const [methods, path] of SIM_ROUTES) {
    if (surface !== undefined && routeOf(surface, path) === undefined) continue;
    for (const m of methods.split(',')) routes.set(`${m} ${path}`, handlers[path]);
  }
  // SGLang serves prometheus_client's app at /metrics when launched with --enable-metrics (not a FastAPI route:
  // no release's surface lists it).
  if (options.enableMetrics)
    routes.set('GET /metrics', (_q, res) => {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(metricsText(engine, options));
    });
  // Simulator-only: cumulative counters, so tests can prove which engine a router sent work to (or that none came).
  routes.set('GET /sim/stats', (_q, res) => sendJson(res, 200, engine.stats()));
  // Simulator-only fault injection for engines in other processes (the Python client's tests): the next n weight
  // updates fail; generation requests wait before their rid is registered while arrivals are held (an abort of
  // one is dropped, as SGLang drops it), `arrivals_waiting` of them now; the break point (`steps.breakAt`): every
  // step stops once request `rid` has `tokens` output tokens, `at_break` while it stands there, until `unbreak`.
  const faults = () => ({
    fail_weight_updates: engine.failWeightUpdates,
    hold_arrivals: engine.arrivals.held,
    arrivals_waiting: engine.arrivals.waiting,
    at_break: engine.scheduler.atBreak,
  });
  routes.set('GET /sim/faults', (_q, res) => sendJson(res, 200, faults()));
  routes.set('POST /sim/faults', async (req, res) => {
    const b = await ctx.body(req, res, SimFaultsSchema);
    if (!b) return;
    if (b.fail_weight_updates !== undefined) engine.failWeightUpdates = b.fail_weight_updates;
    if (b.hold_arrivals === true) engine.arrivals.hold();
    if (b.hold_arrivals === false) engine.arrivals.release();
    if (b.unbreak) engine.scheduler.unbreak();
    if (b.break_at !== undefined) void engine.scheduler.breakAt(b.break_at.rid, b.break_at.tokens);
    sendJson(res, 200, faults());
  });

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
