/**
 * The bench's "uis" process: the product's real stack, not just the proxy core: `ControlPlane` (manager with the
 * external launcher attached to the bench's engines, registry, coordinator) and `UisServer` (InferenceGateway
 * routing with resolveModel + ReplicaSelector, in-flight tracking into the manager, metrics, logs at warn).
 *   tsx uis-gateway-server.ts --port 0 --engines http://127.0.0.1:30001,http://127.0.0.1:30002 --model served-name \
 *     --role rollout
 * Prints `{"port": N}` once listening; `GET /_bench/stats` reports this process's CPU time and, over the window
 * since `?reset`, CPU, context switches, event-loop delay and GC pauses (stalls show there as bursts at clients).
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { createControlPlane } from '@uis/control-plane';
import { GATEWAY_FRONT_DEFAULT as DEFAULT_FRONT, parseConfig } from '@uis/spec';
import { createLogger, createTracing, UisServer } from '../src/index.ts';
import { WindowStats } from './window-stats.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    engines: { type: 'string' },
    model: { type: 'string', default: 'sim-model' },
    role: { type: 'string', default: 'rollout' },
    /** Without per-request metrics and time series (what they cost: the bench's `gateway bare` column). */
    bare: { type: 'boolean', default: false },
    /** With OpenTelemetry tracing on, every request sampled, spans sent to this OTLP/HTTP URL. */
    otlp: { type: 'string' },
    /** Without the self-protection (no circuit breakers, no admission limit): the bench's `gateway unprotected`
     * column, what the protection costs. Otherwise each role has an admission limit high enough never to queue
     * at the bench's concurrency, so every request passes through the gate. */
    unprotected: { type: 'boolean', default: false },
    /** The model's weights can change (`weight_source: disk`): its OpenAI streams are rewritten to declare their
     * versions (`openai_stream_versions`), what that costs per SSE event. */
    'stream-versions': { type: 'boolean', default: false },
    /** `fast`: the fast serving front before node:http (`gateway.front: fast`); `node`: node:http alone. */
    front: { type: 'string', default: DEFAULT_FRONT },
  },
});
const engines = (values.engines ?? '').split(',').filter((u) => u !== '');
if (engines.length === 0) throw new Error('--engines is required');
const model = values.model;

const config = parseConfig({
  cluster: { nodes: [{ name: 'bench-node', gpus: engines.length }] },
  gateway: {
    launcher: 'external',
    external_urls: Object.fromEntries(engines.map((url, i) => [`${model}/${i}`, url])),
  },
  roles: {
    [values.role]: {
      deployment: { mode: 'decoupled' },
      routing: { default_model: model, aliases: { 'bench-alias': model }, policy: 'round_robin' },
      models: [
        {
          name: model,
          model_path: `/bench/${model}`,
          weight_source: values['stream-versions'] ? 'disk' : 'static',
          engine_groups: [{ num_gpus: engines.length, gpus_per_engine: 1 }],
        },
      ],
    },
  },
});
const logger = createLogger('warn');
const plane = await createControlPlane({ config, launcher: 'external', logger });
const uis = new UisServer({
  plane,
  adminToken: 'bench-admin-token',
  logger,
  healthProbeMs: 0,
  servingObservability: !values.bare,
  ...(values.unprotected
    ? { breaker: { enabled: false } }
    : { admission: { limit: 100_000, queue: 1_000, queueTimeoutMs: 30_000 } }),
  tracing: await createTracing(
    values.otlp === undefined
      ? undefined
      : { otlp_endpoint: values.otlp, service_name: 'uis-bench', sample_ratio: 1 },
  ),
});
const listener = uis.requestListener();

const windowStats = new WindowStats();

function stats(reset: boolean): Record<string, unknown> {
  if (reset) return windowStats.reset();
  return { ...windowStats.read(), inFlight: uis.inFlight() };
}

const server = createServer({ keepAliveTimeout: 120_000 }, (req, res) => {
  if (req.url?.startsWith('/_bench/stats')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(stats(req.url.includes('reset'))));
    return;
  }
  listener(req, res);
});
if (values.front === 'fast') uis.attachFastFront(server);
windowStats.listen(server, Number(values.port));
const stop = () => {
  server.closeAllConnections();
  server.close(() => {
    void uis
      .close()
      .then(() => plane.stop())
      .then(() => process.exit(0));
  });
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
