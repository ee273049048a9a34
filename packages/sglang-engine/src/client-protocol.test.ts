import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sseData } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { SGLangClient } from './client.ts';
import { failure } from './testing.ts';

/** Wire-level edge cases against a scripted server: things a healthy simulator never does (renamed endpoints,
 * schema drift, broken streams), each of which must end in a typed error or the documented fallback. */
type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

const servers: Server[] = [];
const clients: SGLangClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  for (const s of servers.splice(0)) s.closeAllConnections();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function serve(routes: Record<string, Handler>): Promise<{ client: SGLangClient; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      const key = `${req.method} ${req.url}`;
      hits.push(key);
      const h = routes[key];
      if (h) h(req, res, body);
      else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"detail":"Not Found"}');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  const client = new SGLangClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  clients.push(client);
  return { client, hits };
}

const json =
  (status: number, value: unknown): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };

const sse =
  (events: string[], end = true): Handler =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of events) res.write(`data: ${e}\n\n`);
    if (end) res.end();
    // Let the chunks reach the client before the connection dies, like an engine crashing mid-stream.
    else setTimeout(() => res.destroy(), 50);
  };

const chunk = (text: string, finish: unknown = null) =>
  JSON.stringify({
    text,
    meta_info: { id: 'r1', finish_reason: finish, prompt_tokens: 3, completion_tokens: 1, cached_tokens: 0 },
  });

async function drain<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe('SGLangClient wire edge cases', () => {
  it('falls back to /get_model_info and /get_server_info and remembers the working name', async () => {
    const { client, hits } = await serve({
      'GET /get_model_info': json(200, { model_path: '/m', is_generation: true, weight_version: 'v3' }),
      'GET /get_server_info': json(200, { model_path: '/m', tp_size: 2, version: '0.4.0' }),
    });
    expect((await client.modelInfo()).model_path).toBe('/m');
    expect((await client.modelInfo()).weight_version).toBe('v3');
    expect((await client.serverInfo()).tp_size).toBe(2);
    expect(hits.filter((h) => h === 'GET /model_info')).toHaveLength(1);
    // No /get_weight_version: the version comes from model info.
    expect(await client.weightVersion()).toBe('v3');
    expect(await client.weightVersion()).toBe('v3');
    expect(hits.filter((h) => h === 'GET /get_weight_version')).toHaveLength(1);
  });

  it('names the wrong field of an answer that does not match the protocol', async () => {
    const { client } = await serve({
      'POST /generate': json(200, { text: 'x', meta_info: { id: 'r', finish_reason: null } }),
      'GET /get_load': json(200, [{ dp_rank: 0, num_reqs: 'many' }]),
      'GET /v1/models': (_q, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html>');
      },
    });
    const e = await failure(client.generate({ text: 'hi' }));
    expect(e.code).toBe('engine_bad_response');
    expect(e.path).toBe('response.meta_info.prompt_tokens');
    const l = await failure(client.load());
    expect(l.path).toBe('response[0].num_reqs');
    expect((await failure(client.models())).code).toBe('engine_bad_response');
  });

  it('keeps status and message of HTTP errors (SGLang, OpenAI and FastAPI bodies)', async () => {
    const { client } = await serve({
      'POST /generate': json(400, { error: { message: 'The input_ids are too long' } }),
      'POST /v1/chat/completions': json(400, { object: 'error', message: 'bad model', type: 'E', code: 400 }),
      'GET /health_generate': json(503, {}),
      'POST /pause_generation': json(500, { detail: 'boom' }),
    });
    const g = await failure(client.generate({ text: 'hi' }));
    expect([g.code, g.engineStatus, g.status]).toEqual(['engine_http_error', 400, 400]);
    expect(g.message).toContain('The input_ids are too long');
    const c = await failure(
      client.chatCompletions({ model: 'm', messages: [{ role: 'user', content: 'x' }] }),
    );
    expect(c.message).toContain('bad model');
    expect(await client.healthGenerate()).toBe(false);
    const p = await failure(client.pauseGeneration('abort'));
    expect([p.engineStatus, p.status]).toEqual([500, 502]);
    expect(p.message).toContain('boom');
  });

  it('retries flush_cache while it answers 400 and gives up at the deadline', async () => {
    let busy = 3;
    const { client, hits } = await serve({
      'POST /flush_cache': (_q, res) => {
        res.writeHead(busy-- > 0 ? 400 : 200, { 'content-type': 'text/plain' });
        res.end('Cache flushed.');
      },
    });
    await client.flushCache({ deadlineMs: 10_000, retryIntervalMs: 10 });
    expect(hits).toHaveLength(4);
    busy = 1000;
    const e = await failure(client.flushCache({ deadlineMs: 1_000, retryIntervalMs: 50 }));
    expect(e.code).toBe('engine_timeout');
    expect(e.message).toContain('400');
  });

  it('says "still busy" when the deadline runs out in an attempt after the engine answered busy', async () => {
    let calls = 0;
    const { client } = await serve({
      'POST /flush_cache': (_q, res) => {
        // Busy once, then silent: the second attempt holds what is left of the deadline and times out.
        if (calls++ > 0) return;
        res.writeHead(400, { 'content-type': 'text/plain' });
        res.end('busy');
      },
    });
    const e = await failure(client.flushCache({ deadlineMs: 300, retryIntervalMs: 10 }));
    expect(e.code).toBe('engine_timeout');
    expect(e.message).toMatch(
      /still busy \(400: requests running\) after 2 attempts .*the last attempt: .*no complete answer/,
    );
  });

  it('reports an error event, a cut stream, a non-JSON event and a non-SSE answer as typed errors', async () => {
    const { client } = await serve({
      'POST /generate': sse([chunk('a'), '{"error":{"message":"CUDA out of memory"}}']),
      'POST /v1/chat/completions': sse(['not json']),
    });
    const seen: string[] = [];
    const e = await failure(
      (async () => {
        for await (const c of client.generateStream({ text: 'hi' })) seen.push(c.text);
      })(),
    );
    expect(seen).toEqual(['a']);
    expect(e.code).toBe('engine_stream_error');
    expect(e.message).toContain('CUDA out of memory');
    const bad = await failure(
      drain(client.chatCompletionsStream({ model: 'm', messages: [{ role: 'user' }] })),
    );
    expect([bad.code, bad.path]).toEqual(['engine_bad_response', 'stream[0]']);

    const cut = await serve({ 'POST /generate': sse([chunk('a'), chunk('ab')], false) });
    const c2 = await failure(drain(cut.client.generateStream({ text: 'hi' })));
    expect(c2.code).toBe('engine_stream_error');

    const ended = await serve({ 'POST /generate': sse([chunk('a')], true) });
    const c3 = await failure(drain(ended.client.generateStream({ text: 'hi' })));
    expect(c3.code).toBe('engine_stream_error');
    expect(c3.message).toContain('without [DONE]');

    const plain = await serve({ 'POST /generate': json(200, { text: 'x' }) });
    const c4 = await failure(drain(plain.client.generateStream({ text: 'hi' })));
    expect([c4.code, c4.path]).toEqual(['engine_bad_response', 'response.headers.content-type']);
  });

  it('turns a silent engine into engine_timeout (whole-call and idle deadlines) and a caller abort into engine_aborted', async () => {
    const { client } = await serve({
      'POST /generate': () => {
        // Never answers.
      },
    });
    const t = await failure(client.generate({ text: 'hi' }, { timeoutMs: 200 }));
    expect([t.code, t.status]).toEqual(['engine_timeout', 504]);
    const i = await failure(client.generate({ text: 'hi' }, { idleTimeoutMs: 200 }));
    expect(i.code).toBe('engine_timeout');
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const a = await failure(client.generate({ text: 'hi' }, { signal: ac.signal }));
    expect(a.code).toBe('engine_aborted');
  });

  it('answers engine_unreachable when nothing listens; flush gives up after consecutive connection errors', async () => {
    const client = new SGLangClient('http://127.0.0.1:1');
    clients.push(client);
    const e = await failure(client.health());
    expect([e.code, e.status]).toEqual(['engine_unreachable', 502]);
    const t0 = Date.now();
    const f = await failure(
      client.flushCache({ deadlineMs: 60_000, retryIntervalMs: 10, maxConnectErrors: 3 }),
    );
    expect(f.code).toBe('engine_unreachable');
    expect(Date.now() - t0).toBeLessThan(30_000);
  });
});

describe('sseData', () => {
  async function* from(parts: string[]) {
    for (const p of parts) yield new TextEncoder().encode(p);
  }
  it('splits events across arbitrary chunk boundaries, CRLF and multi-line data', async () => {
    const parts = [
      'data: {"a"',
      ':1}\n',
      '\ndata: x\r\n\r\n: comment\n\ndata: l1\ndata: l2\n\nda',
      'ta: [DONE]\n\n',
    ];
    expect(await drain(sseData(from(parts)))).toEqual(['{"a":1}', 'x', 'l1\nl2', '[DONE]']);
  });
  it('yields a last event without a trailing blank line', async () => {
    expect(await drain(sseData(from(['data: a\n\ndata: b'])))).toEqual(['a', 'b']);
  });
});
