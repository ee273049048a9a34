import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { type ErrorBody, UisError } from '@uis/spec';
import { Hono } from 'hono';
import { Agent, request } from 'undici';
import { GENERATE_EDIT, openAIEdit } from '../proxy/body.ts';
import { createCombinedListener, FastRoutes } from '../proxy/fast-routes.ts';
import {
  type CompletionEvent,
  createServingHandler,
  type ForwardRoute,
  type ProxyTarget,
  type ServingProxyOptions,
} from '../proxy/forward.ts';
import { InFlightCounter } from '../proxy/in-flight.ts';
import { UpstreamPools } from '../proxy/upstream-pools.ts';
import { listen, readAll, type TestServer } from './proxy.ts';

/** The serving proxy's test bench: engines on 127.0.0.1, a gateway listener whose routes pick among given targets,
 * and a keep-alive client. A test file calls `afterAll(closeServing)`. */

export interface Seen {
  path: string | undefined;
  headers: IncomingMessage['headers'];
  raw: string;
}

const servers: TestServer[] = [];
const pools: UpstreamPools[] = [];
export const client = new Agent({ keepAliveTimeout: 1000 });

/** Closes every engine, gateway and pool the harness made, and the client (a test file's afterAll). */
export async function closeServing(): Promise<void> {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await Promise.all(pools.splice(0).map((p) => p.close()));
  await client.close();
}

export async function upstream(handler: Parameters<typeof listen>[0]): Promise<TestServer> {
  const s = await listen(handler);
  servers.push(s);
  return s;
}

/** An engine that answers JSON describing what it received. */
export async function echoEngine(seen: Seen[]): Promise<TestServer> {
  return upstream(async (req, res) => {
    const raw = (await readAll(req)).toString();
    seen.push({ path: req.url, headers: req.headers, raw });
    const body = JSON.stringify({ ok: true, got: raw.length });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      connection: 'keep-alive, x-hop',
      'x-hop': 'secret',
      'keep-alive': 'timeout=5',
      'proxy-authenticate': 'Basic',
      'x-engine': 'e1',
    });
    res.end(body);
  });
}

export interface Harness {
  url: string;
  inFlight: InFlightCounter;
  events: CompletionEvent[];
  aborts: Array<{ rid: string | string[]; target: ProxyTarget }>;
  completed(n: number): Promise<void>;
}

/** A gateway listener: fast serving routes for role `r`, Hono for the rest. */
export async function gateway(
  targets: ProxyTarget[],
  opts: { edit?: ForwardRoute['edit']; pools?: UpstreamPools; extra?: Partial<ServingProxyOptions> } = {},
): Promise<Harness> {
  const inFlight = new InFlightCounter();
  const events: CompletionEvent[] = [];
  const aborts: Harness['aborts'] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const p = opts.pools ?? new UpstreamPools();
  pools.push(p);
  const pick = (excluding?: ReadonlySet<string>): ProxyTarget | UisError =>
    targets.find((t) => !excluding?.has(t.id)) ??
    new UisError({ code: 'no_replica', message: 'no engine can serve' });
  const options: ServingProxyOptions = {
    pools: p,
    inFlight,
    maxBodyBytes: 1024,
    hooks: {
      onClientAbort: (rid, target) => aborts.push({ rid, target }),
      onComplete: (e) => {
        events.push(e);
        for (const w of waiters) if (events.length >= w.n) w.resolve();
      },
    },
    ...opts.extra,
  };
  const generate = createServingHandler(options, () => ({
    path: '/generate',
    pick,
    edit: opts.edit ?? GENERATE_EDIT,
  }));
  const chat = createServingHandler(options, () => ({
    path: '/v1/chat/completions',
    pick,
    edit: openAIEdit('served-name'),
  }));
  const app = new Hono();
  app.get('/r/health', (c) => c.json({ alive: true }));
  const routes = new FastRoutes()
    .add('POST', '/r/generate', generate)
    .add('POST', '/r/v1/chat/completions', chat);
  const s = await listen(
    createCombinedListener({ serving: routes, fallback: getRequestListener(app.fetch) }),
  );
  servers.push(s);
  return {
    url: s.url,
    inFlight,
    events,
    aborts,
    completed: (n) =>
      events.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })),
  };
}

export async function post(url: string, body: string, headers: Record<string, string> = {}) {
  const r = await request(url, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
    dispatcher: client,
  });
  const text = await r.body.text();
  return {
    status: r.statusCode,
    headers: r.headers,
    text,
    json: () => JSON.parse(text) as ErrorBody & Record<string, unknown>,
  };
}

/** Reads a streaming response chunk by chunk with node:http, so the test controls when the client stops. */
export function openStream(url: string, body: string) {
  const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' } });
  req.end(body);
  return { req, response: once(req, 'response').then(([res]) => res as IncomingMessage) };
}
