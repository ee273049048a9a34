/**
 * The bench's gateway process: the real proxy (fast routes + undici forwarder) with round-robin over the engines
 * and a Hono fallback that reports this process's CPU time, so the bench can charge CPU per request.
 *   tsx gateway-server.ts --port 0 --engines http://127.0.0.1:30001,http://127.0.0.1:30002 --model served-name
 * Prints `{"port": N}` once listening.
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { getRequestListener } from '@hono/node-server';
import { UisError } from '@uis/spec';
import { Hono } from 'hono';
import {
  type CompletionEvent,
  createCombinedListener,
  createServingHandler,
  FastRoutes,
  GENERATE_EDIT,
  InFlightCounter,
  openAIEdit,
  type ProxyTarget,
  rolePaths,
  UpstreamPools,
} from '../src/proxy/index.ts';
import { Samples, summarize } from './load-stats.ts';
import { WindowStats } from './window-stats.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    engines: { type: 'string' },
    model: { type: 'string', default: 'sim-model' },
    role: { type: 'string', default: 'bench' },
    'no-rid': { type: 'boolean', default: false },
  },
});
const targets: ProxyTarget[] = (values.engines ?? '')
  .split(',')
  .filter((u) => u !== '')
  .map((origin, i) => ({ id: `engine-${i}`, origin }));
if (targets.length === 0) throw new Error('--engines is required');

let next = 0;
const pick = (excluding?: ReadonlySet<string>): ProxyTarget | UisError => {
  for (let i = 0; i < targets.length; i++) {
    const t = targets[next++ % targets.length]!;
    if (excluding === undefined || !excluding.has(t.id)) return t;
  }
  return new UisError({ code: 'no_replica', message: 'no engine left to try' });
};

let completed = 0;
const outcomes: Record<string, number> = {};
let lastError: string | undefined;
// Where a request's time goes inside the gateway (ms): body read, wait for an engine socket, engine headers,
// first byte out; all relative to the request's arrival, plus the event loop's delay.
const newPhases = () => ({
  body: new Samples(),
  queued: new Samples(),
  engine: new Samples(),
  relay: new Samples(),
  ttfb: new Samples(),
});
let phases = newPhases();
const windowStats = new WindowStats();
const inFlight = new InFlightCounter();
const options = {
  injectRid: !values['no-rid'],
  pools: new UpstreamPools(),
  inFlight,
  hooks: {
    onComplete: (e: CompletionEvent) => {
      completed++;
      outcomes[e.outcome] = (outcomes[e.outcome] ?? 0) + 1;
      if (e.error !== undefined) lastError = `${e.error.code}: ${e.error.message}`;
      const { bodyMs, upstreamStartMs, ttfbMs, firstByteOutMs } = e;
      if (bodyMs === undefined || upstreamStartMs === undefined || ttfbMs === undefined) return;
      phases.body.add(bodyMs);
      phases.queued.add(upstreamStartMs - bodyMs);
      phases.engine.add(ttfbMs - upstreamStartMs);
      phases.ttfb.add(ttfbMs);
      if (firstByteOutMs !== undefined) phases.relay.add(firstByteOutMs - ttfbMs);
    },
  },
};
const paths = rolePaths(values.role);
const generate = createServingHandler(options, () => ({
  path: '/generate',
  pick,
  edit: GENERATE_EDIT,
}));
const chat = createServingHandler(options, () => ({
  path: '/v1/chat/completions',
  pick,
  edit: openAIEdit(values.model),
}));
const routes = new FastRoutes().add('POST', paths.generate, generate);
for (const p of paths.chat) routes.add('POST', p, chat);

const app = new Hono();
app.get('/_bench/stats', (c) => {
  if (c.req.query('reset') !== undefined) {
    // Start of a measured window: no summaries (sorting the last window's samples would be charged to this one).
    phases = newPhases();
    return c.json(windowStats.reset());
  }
  return c.json({
    ...windowStats.read(),
    completed,
    inFlight: inFlight.total,
    phasesMs: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, summarize(v)])),
    outcomes,
    lastError,
    pools: options.pools.stats(),
    churn: options.pools.churn,
  });
});

const server = createServer(
  { keepAliveTimeout: 120_000 },
  createCombinedListener({ serving: routes, fallback: getRequestListener(app.fetch) }),
);
windowStats.listen(server, Number(values.port));
const stop = () => {
  // A bench process: no graceful drain, just leave (the bench stops it between runs).
  server.closeAllConnections();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
