import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { waitFor } from '@uis/sglang-engine/testing';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { deferred, readAll } from '../testing/proxy.ts';
import {
  client,
  closeServing,
  echoEngine,
  gateway,
  type Harness,
  openStream,
  post,
  type Seen,
  upstream,
} from '../testing/serving-harness.ts';
import { UpstreamPools } from './upstream-pools.ts';

afterAll(closeServing);

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

  it('injects its own request id as the rid, and a fresh id when the client named the request', async () => {
    await post(`${gw.url}/r/generate`, '{"text":"a"}');
    const ours = seen[0]!.headers['x-request-id'];
    expect(ours).toMatch(/^[0-9a-f-]{36}$/);
    expect((JSON.parse(seen[0]!.raw) as { rid: string }).rid).toBe(ours);
    // A client's id need not be unique; the rid an engine keys its requests by must be.
    await post(`${gw.url}/r/generate`, '{"text":"b"}', { 'x-request-id': 'client-1' });
    await post(`${gw.url}/r/generate`, '{"text":"c"}', { 'x-request-id': 'client-1' });
    const rids = [1, 2].map((i) => (JSON.parse(seen[i]!.raw) as { rid: string }).rid);
    expect(seen[1]!.headers['x-request-id']).toBe('client-1');
    expect(rids[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(rids[1]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set([ours, ...rids]).size).toBe(3);
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
    await waitFor(() => engineWaited > 0, 20_000, 'the engine made to wait for a drain');
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
    const parts: Buffer[] = [];
    const engine = await upstream(async (req, res) => {
      await readAll(req);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      // Two separate chunks: the second only once the client has the first.
      await waitFor(() => Buffer.concat(parts).includes('data: 1'), 10_000, 'the first event relayed');
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
});
