import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { type AddressInfo, connect, createServer as createNetServer } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { type ErrorBody, UisError } from '@uis/spec';
import { Hono } from 'hono';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCombinedListener, FastRoutes } from './fast-routes.ts';
import {
  type CompletionEvent,
  createServingHandler,
  type ForwardRoute,
  type ProxyTarget,
  type ServingProxyOptions,
} from './forward.ts';
import { InFlightCounter } from './in-flight.ts';
import { deadPort, deferred, listen, readAll, type TestServer } from './test-helpers.ts';
import { UpstreamPools } from './upstream-pools.ts';

interface Seen {
  path: string | undefined;
  headers: IncomingMessage['headers'];
  raw: string;
}

const servers: TestServer[] = [];
const pools: UpstreamPools[] = [];
const client = new Agent({ keepAliveTimeout: 1000 });

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await Promise.all(pools.map((p) => p.close()));
  await client.close();
});

async function upstream(handler: Parameters<typeof listen>[0]): Promise<TestServer> {
  const s = await listen(handler);
  servers.push(s);
  return s;
}

/** An engine that answers JSON describing what it received. */
async function echoEngine(seen: Seen[]): Promise<TestServer> {
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

interface Harness {
  url: string;
  inFlight: InFlightCounter;
  events: CompletionEvent[];
  aborts: Array<{ rid: string | string[]; target: ProxyTarget }>;
  completed(n: number): Promise<void>;
}

/** A gateway listener: fast serving routes for role `r`, Hono for the rest. */
async function gateway(
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
    edit: opts.edit ?? { remove: ['model', 'route_key'] },
  }));
  const chat = createServingHandler(options, () => ({
    path: '/v1/chat/completions',
    pick,
    edit: { set: { model: 'served-name' }, remove: ['route_key'] },
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

async function post(url: string, body: string, headers: Record<string, string> = {}) {
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

describe('fast routes and fallback', () => {
  let gw: Harness;
  beforeAll(async () => {
    gw = await gateway([]);
  });

  it('sends non-serving paths to the framework', async () => {
    const r = await request(`${gw.url}/r/health`, { dispatcher: client });
    expect(r.statusCode).toBe(200);
    expect(await r.body.json()).toEqual({ alive: true });
    const miss = await post(`${gw.url}/r/other`, '{}');
    expect(miss.status).toBe(404);
  });

  it('matches serving paths with a query string', async () => {
    const r = await post(`${gw.url}/r/generate?x=1`, '{}');
    expect(r.status).toBe(503);
    expect(r.json().error).toMatchObject({ code: 'no_replica' });
  });
});

describe('request validation', () => {
  let gw: Harness;
  const seen: Seen[] = [];
  beforeAll(async () => {
    const e = await echoEngine(seen);
    gw = await gateway([{ id: 'e1', origin: e.url }]);
  });

  it('refuses a body over the limit with 413 JSON', async () => {
    const r = await post(`${gw.url}/r/generate`, JSON.stringify({ text: 'x'.repeat(2000) }));
    expect(r.status).toBe(413);
    expect(r.json().error).toMatchObject({ code: 'body_too_large', path: 'body' });
    expect(seen).toHaveLength(0);
  });

  it('refuses invalid JSON, non-objects and mistyped routing fields with 400 and a path', async () => {
    const bad = await post(`${gw.url}/r/generate`, '{"text": ');
    expect(bad.status).toBe(400);
    expect(bad.json().error).toMatchObject({ code: 'invalid_json', path: 'body' });
    const arr = await post(`${gw.url}/r/generate`, '[1]');
    expect(arr.status).toBe(400);
    expect(arr.json().error).toMatchObject({ code: 'invalid_body', path: 'body' });
    const typed = await post(`${gw.url}/r/generate`, '{"text":"a","stream":"yes"}');
    expect(typed.status).toBe(400);
    expect(typed.json().error).toMatchObject({ code: 'invalid_body', path: 'body.stream' });
    expect(seen).toHaveLength(0);
    expect(gw.inFlight.total).toBe(0);
  });
});

describe('forwarding', () => {
  const seen: Seen[] = [];
  let gw: Harness;
  beforeAll(async () => {
    const e = await echoEngine(seen);
    gw = await gateway([{ id: 'e1', origin: e.url }]);
  });
  afterEach(() => {
    seen.length = 0;
  });

  it('removes model and route_key, injects a rid, and relays the answer', async () => {
    const r = await post(`${gw.url}/r/generate`, '{"model":"m","route_key":"k","text":"hi"}');
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({ ok: true });
    const sent = JSON.parse(seen[0]!.raw) as Record<string, unknown>;
    expect(sent.model).toBeUndefined();
    expect(sent.route_key).toBeUndefined();
    expect(sent.text).toBe('hi');
    expect(typeof sent.rid).toBe('string');
    expect(seen[0]!.path).toBe('/generate');
    expect(seen[0]!.headers['content-length']).toBe(String(Buffer.byteLength(seen[0]!.raw)));
  });

  it('forwards the exact bytes when nothing changes, and splices a rid without re-serializing', async () => {
    const keep = '{ "text" :  "a\\u00e9",\n "rid": "r1" }';
    await post(`${gw.url}/r/generate`, keep);
    expect(seen[0]!.raw).toBe(keep);
    const spliced = '{ "text" :  "b" }';
    await post(`${gw.url}/r/generate`, spliced);
    expect(seen[1]!.raw).toMatch(/^\{"rid":"[0-9a-f-]{36}", "text" : {2}"b" \}$/);
    await post(`${gw.url}/r/generate`, ' { } ');
    expect(JSON.parse(seen[2]!.raw)).toEqual({ rid: expect.any(String) });
  });

  it('rewrites model for chat', async () => {
    const r = await post(`${gw.url}/r/v1/chat/completions`, '{"model":"alias","messages":[]}');
    expect(r.status).toBe(200);
    expect(JSON.parse(seen[0]!.raw)).toMatchObject({ model: 'served-name', messages: [] });
    expect(seen[0]!.path).toBe('/v1/chat/completions');
  });

  it('propagates x-request-id, or generates one, and returns it', async () => {
    const given = await post(`${gw.url}/r/generate`, '{}', { 'x-request-id': 'req-42' });
    expect(given.headers['x-request-id']).toBe('req-42');
    expect(seen[0]!.headers['x-request-id']).toBe('req-42');
    const made = await post(`${gw.url}/r/generate`, '{}');
    const id = made.headers['x-request-id'];
    expect(typeof id).toBe('string');
    expect(seen[1]!.headers['x-request-id']).toBe(id);
  });

  it('labels the forwarded body JSON whatever the client sent', async () => {
    await post(`${gw.url}/r/generate`, '{"text":"hi"}', { 'content-type': 'text/plain;charset=UTF-8' });
    await post(`${gw.url}/r/generate`, '{"text":"hi"}', { 'content-type': 'application/json' });
    expect(seen.map((s) => s.headers['content-type'])).toEqual(['application/json', 'application/json']);
  });

  it('strips hop-by-hop headers both ways and keeps end-to-end ones', async () => {
    // node:http sends a custom Connection list as given (undici would refuse it).
    const req = httpRequest(`${gw.url}/r/generate`, {
      method: 'POST',
      headers: {
        connection: 'x-secret',
        'x-secret': 's',
        te: 'trailers',
        'proxy-authorization': 'Basic Zm9v',
        'x-custom': 'kept',
        authorization: 'Bearer t',
        cookie: 'session=s',
      },
    });
    req.end('{}');
    const [r] = (await once(req, 'response')) as [IncomingMessage];
    await readAll(r);
    const h = seen[0]!.headers;
    expect(h['x-secret']).toBeUndefined();
    expect(h.te).toBeUndefined();
    expect(h['proxy-authorization']).toBeUndefined();
    expect(h['x-custom']).toBe('kept');
    // The client's credentials are the gateway's to check, never an engine's to see.
    expect(h.authorization).toBeUndefined();
    expect(h.cookie).toBeUndefined();
    expect(h.host).toBe(new URL(gw.events.at(-1)!.target!.origin).host);
    expect(r.headers['x-hop']).toBeUndefined();
    expect(r.headers['proxy-authenticate']).toBeUndefined();
    expect(r.headers['x-engine']).toBe('e1');
  });

  it('relays engine error statuses unchanged', async () => {
    const engine = await upstream((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"bad sampling params"}}');
    });
    const g = await gateway([{ id: 'x', origin: engine.url }]);
    const r = await post(`${g.url}/r/generate`, '{}');
    expect(r.status).toBe(400);
    expect(r.json()).toEqual({ error: { message: 'bad sampling params' } });
  });

  it('relays a large sized engine answer intact (streamed, not buffered)', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 'a');
    const engine = await upstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': big.length });
      res.end(big);
    });
    const g = await gateway([{ id: 'big', origin: engine.url }]);
    const r = await request(`${g.url}/r/generate`, { method: 'POST', body: '{}', dispatcher: client });
    expect(r.headers['content-length']).toBe(String(big.length));
    const got = Buffer.from(await r.body.arrayBuffer());
    expect(got.length).toBe(big.length);
    expect(got.equals(big)).toBe(true);
  });

  it('reports completion with status, bytes and timings, and releases in-flight', async () => {
    const before = gw.events.length;
    await post(`${gw.url}/r/generate`, '{"text":"abc"}');
    await gw.completed(before + 1);
    const e = gw.events.at(-1)!;
    expect(e).toMatchObject({ status: 200, outcome: 'ok', attempts: 1, target: { id: 'e1' } });
    expect(e.bytesUp).toBeGreaterThan(10);
    expect(e.bytesDown).toBeGreaterThan(5);
    // Phases in order: body read <= socket assigned <= engine headers <= first byte out <= done.
    expect(e.upstreamStartMs).toBeGreaterThanOrEqual(e.bodyMs!);
    expect(e.ttfbMs).toBeGreaterThanOrEqual(e.upstreamStartMs!);
    expect(e.firstByteOutMs).toBeGreaterThanOrEqual(e.ttfbMs!);
    expect(e.totalMs).toBeGreaterThanOrEqual(e.firstByteOutMs!);
    expect(gw.inFlight.total).toBe(0);
  });

  it('keeps engine sockets alive across requests (pool churn counters)', async () => {
    const engine = await upstream(async (req, res) => {
      await readAll(req);
      res.end('{}');
    });
    const own = new UpstreamPools();
    const g = await gateway([{ id: 'k', origin: engine.url }], { pools: own });
    for (let i = 0; i < 3; i++) expect((await post(`${g.url}/r/generate`, '{"text":"x"}')).status).toBe(200);
    expect(own.churn).toMatchObject({ connects: 1, disconnects: 0 });
    await own.close();
    expect(own.churn.disconnects).toBe(1);
  });
});

/** Reads a streaming response chunk by chunk with node:http, so the test controls when the client stops. */
function openStream(url: string, body: string) {
  const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' } });
  req.end(body);
  return { req, response: once(req, 'response').then(([res]) => res as IncomingMessage) };
}

// Streams against real sockets: room for a loaded machine beyond the 5 s default.
describe('streaming', { timeout: 30_000 }, () => {
  it('relays each chunk before the engine finishes', async () => {
    const release = deferred();
    const engine = await upstream(async (req, res) => {
      await readAll(req);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"text":"a"}\n\n');
      await release.promise;
      res.write('data: {"text":"ab"}\n\n');
      res.end('data: [DONE]\n\n');
    });
    const gw = await gateway([{ id: 'e', origin: engine.url }]);
    const { response } = openStream(`${gw.url}/r/generate`, '{"stream":true}');
    const res = await response;
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.headers['x-request-id']).toBeDefined();
    const [first] = (await once(res, 'data')) as [Buffer];
    expect(first.toString()).toBe('data: {"text":"a"}\n\n');
    expect(gw.inFlight.get('e')).toBe(1);
    release.resolve();
    let rest = '';
    res.on('data', (c: Buffer) => {
      rest += c.toString();
    });
    await once(res, 'end');
    expect(rest).toBe('data: {"text":"ab"}\n\ndata: [DONE]\n\n');
    await gw.completed(1);
    expect(gw.inFlight.total).toBe(0);
  });

  it('sends the response headers while the engine has sent headers but no event yet', async () => {
    const release = deferred();
    const engine = await upstream(async (req, res) => {
      await readAll(req);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      await release.promise;
      res.end('data: [DONE]\n\n');
    });
    const gw = await gateway([{ id: 'e', origin: engine.url }]);
    const { response } = openStream(`${gw.url}/r/generate`, '{"stream":true}');
    const res = await response;
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    release.resolve();
    let rest = '';
    res.on('data', (c: Buffer) => {
      rest += c.toString();
    });
    await once(res, 'end');
    expect(rest).toBe('data: [DONE]\n\n');
    await gw.completed(1);
  });

  it('relays a long stream byte for byte to a client that stops reading for a while (backpressure)', async () => {
    const events = Array.from(
      { length: 3000 },
      (_, i) => `data: {"i":${i},"pad":"${'x'.repeat(i % 700)}"}\n\n`,
    );
    let engineWaited = 0;
    const engine = await upstream(async (req, res) => {
      await readAll(req);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of events) {
        if (!res.write(e)) {
          engineWaited++;
          await once(res, 'drain');
        }
      }
      res.end();
    });
    const gw = await gateway([{ id: 'e', origin: engine.url }]);
    const { response } = openStream(`${gw.url}/r/generate`, '{"stream":true}');
    const res = await response;
    res.pause();
    // Several MB queue up: the engine must be made to wait, not the gateway to buffer everything.
    for (const end = Date.now() + 20_000; engineWaited === 0 && Date.now() < end; )
      await new Promise((r) => setTimeout(r, 10));
    expect(engineWaited).toBeGreaterThan(0);
    const parts: Buffer[] = [];
    res.on('data', (c: Buffer) => parts.push(c));
    res.resume();
    await once(res, 'end');
    expect(Buffer.concat(parts).toString()).toBe(events.join(''));
    await gw.completed(1);
    // Relayed with the engine's own chunk framing, which bytesDown counts too.
    expect(gw.events[0]).toMatchObject({ outcome: 'ok' });
    expect(gw.events[0]!.bytesDown).toBeGreaterThan(Buffer.byteLength(events.join('')));
    expect(gw.events[0]!.bytesDown).toBeLessThan(Buffer.byteLength(events.join('')) + 12 * events.length);
  });

  it('relays a stream to an HTTP/1.0 client unframed, ending with the connection', async () => {
    const engine = await upstream(async (req, res) => {
      await readAll(req);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      await new Promise((r) => setTimeout(r, 20));
      res.write('data: 2\n\n');
      res.end('data: [DONE]\n\n');
    });
    const gw = await gateway([{ id: 'e', origin: engine.url }]);
    const { port } = new URL(gw.url);
    const sock = connect(Number(port), '127.0.0.1');
    const body = '{"stream":true}';
    sock.write(
      `POST /r/generate HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    );
    const parts: Buffer[] = [];
    sock.on('data', (c: Buffer) => parts.push(c));
    await once(sock, 'close');
    const text = Buffer.concat(parts).toString();
    expect(text.startsWith('HTTP/1.1 200')).toBe(true);
    expect(text.toLowerCase()).not.toContain('transfer-encoding');
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe('data: 1\n\ndata: 2\n\ndata: [DONE]\n\n');
  });

  it('aborts the engine request and calls onClientAbort when the client disconnects', async () => {
    const engineClosed = deferred();
    const engine = await upstream(async (req, res) => {
      await readAll(req);
      res.on('close', () => engineClosed.resolve());
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"text":"a"}\n\n');
    });
    const gw = await gateway([{ id: 'e', origin: engine.url }]);
    const { req, response } = openStream(`${gw.url}/r/generate`, '{"stream":true,"rid":"my-rid"}');
    const res = await response;
    await once(res, 'data');
    req.destroy();
    await engineClosed.promise;
    await gw.completed(1);
    expect(gw.aborts).toEqual([{ rid: 'my-rid', target: { id: 'e', origin: engine.url } }]);
    expect(gw.events[0]).toMatchObject({ outcome: 'client_abort', rid: 'my-rid' });
    expect(gw.inFlight.total).toBe(0);
  });

  it('aborts with the injected rid when the client leaves before the engine answers', async () => {
    const seenRid = deferred<string>();
    const engineClosed = deferred();
    const engine = await upstream(async (req, res) => {
      seenRid.resolve((JSON.parse((await readAll(req)).toString()) as { rid: string }).rid);
      res.on('close', () => engineClosed.resolve());
    });
    const gw = await gateway([{ id: 'e', origin: engine.url }]);
    const { req, response } = openStream(`${gw.url}/r/generate`, '{"text":"x"}');
    response.catch(() => {});
    req.on('error', () => {});
    const rid = await seenRid.promise;
    req.destroy();
    await engineClosed.promise;
    await gw.completed(1);
    expect(gw.aborts.map((a) => a.rid)).toEqual([rid]);
    expect(gw.inFlight.total).toBe(0);
  });

  it('never replays a stream that broke after its first byte', async () => {
    let secondCalls = 0;
    const broken = await upstream(async (req, res) => {
      await readAll(req);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"text":"a"}\n\n', () => setTimeout(() => res.socket?.destroy(), 50));
    });
    const spare = await upstream((_req, res) => {
      secondCalls++;
      res.end('{}');
    });
    const gw = await gateway([
      { id: 'a', origin: broken.url },
      { id: 'b', origin: spare.url },
    ]);
    const { response } = openStream(`${gw.url}/r/generate`, '{"stream":true}');
    const res = await response;
    let got = '';
    res.on('data', (c: Buffer) => {
      got += c.toString();
    });
    const ended = await new Promise<string>((resolve) => {
      res.on('end', () => resolve('end'));
      res.on('error', () => resolve('error'));
      res.on('aborted', () => resolve('aborted'));
    });
    expect(ended).not.toBe('end');
    expect(got).toBe('data: {"text":"a"}\n\n');
    await gw.completed(1);
    expect(secondCalls).toBe(0);
    expect(gw.events[0]).toMatchObject({ outcome: 'error', attempts: 1 });
    expect(gw.inFlight.total).toBe(0);
  });
});

describe('engine failures', () => {
  it('retries once on another engine when the first is unreachable', async () => {
    const seen: Seen[] = [];
    const good = await echoEngine(seen);
    const gw = await gateway([
      { id: 'dead', origin: `http://127.0.0.1:${await deadPort()}` },
      { id: 'good', origin: good.url },
    ]);
    const r = await post(`${gw.url}/r/generate`, '{"text":"x"}');
    expect(r.status).toBe(200);
    expect(seen).toHaveLength(1);
    await gw.completed(1);
    expect(gw.events[0]).toMatchObject({ attempts: 2, target: { id: 'good' }, outcome: 'ok' });
    expect(gw.inFlight.total).toBe(0);
  });

  it('answers 502 when the retry fails too, or when no other engine exists', async () => {
    const both = await gateway([
      { id: 'd1', origin: `http://127.0.0.1:${await deadPort()}` },
      { id: 'd2', origin: `http://127.0.0.1:${await deadPort()}` },
      { id: 'd3', origin: `http://127.0.0.1:${await deadPort()}` },
    ]);
    const r = await post(`${both.url}/r/generate`, '{}');
    expect(r.status).toBe(502);
    expect(r.json().error).toMatchObject({ code: 'engine_unreachable' });
    await both.completed(1);
    expect(both.events[0]).toMatchObject({ attempts: 2, target: { id: 'd2' } });
    const single = await gateway([{ id: 'only', origin: `http://127.0.0.1:${await deadPort()}` }]);
    const s = await post(`${single.url}/r/generate`, '{}');
    expect(s.status).toBe(502);
    expect(s.json().error.message).toContain('only');
    expect(single.inFlight.total).toBe(0);
    expect(both.inFlight.total).toBe(0);
  });

  it('answers 504 when the engine does not answer in time', async () => {
    const silent = await upstream(() => {});
    const gw = await gateway([{ id: 's', origin: silent.url }], {
      pools: new UpstreamPools({ headersTimeoutMs: 300 }),
    });
    const r = await post(`${gw.url}/r/generate`, '{}');
    expect(r.status).toBe(504);
    expect(r.json().error).toMatchObject({ code: 'engine_timeout' });
    expect(gw.inFlight.total).toBe(0);
  });

  it('answers 502 engine_bad_response when the engine does not speak HTTP/1.1', async () => {
    const garbage = createNetServer((socket) => socket.once('data', () => socket.end('SSH-2.0-x\r\n\r\n')));
    garbage.listen(0, '127.0.0.1');
    await once(garbage, 'listening');
    try {
      const port = (garbage.address() as AddressInfo).port;
      const gw = await gateway([{ id: 'g', origin: `http://127.0.0.1:${port}` }]);
      const r = await post(`${gw.url}/r/generate`, '{}');
      expect(r.status).toBe(502);
      expect(r.json().error).toMatchObject({ code: 'engine_bad_response' });
      expect(r.json().error.message).toContain('bad status line');
      expect(gw.inFlight.total).toBe(0);
    } finally {
      await new Promise<void>((resolve) => garbage.close(() => resolve()));
    }
  });

  it('passes a routing refusal through without touching any engine', async () => {
    const gw = await gateway([]);
    const r = await post(`${gw.url}/r/generate`, '{"model":"m"}');
    expect(r.status).toBe(503);
    expect(r.json().error).toMatchObject({ code: 'no_replica' });
    await gw.completed(1);
    expect(gw.events[0]).toMatchObject({ attempts: 0, target: undefined, status: 503 });
  });
});
