import { once } from 'node:events';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { waitFor } from '@uis/sglang-engine/testing';
import { type SimServer, startSimServer } from '@uis/sglang-sim';
import { UisError } from '@uis/spec';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadPort, listen, type TestServer } from '../testing/proxy.ts';
import { GENERATE_EDIT, openAIEdit } from './body.ts';
import { createCombinedListener, FastRoutes } from './fast-routes.ts';
import { type CompletionEvent, createServingHandler, type ProxyTarget } from './forward.ts';
import { InFlightCounter } from './in-flight.ts';
import { UpstreamPools } from './upstream-pools.ts';

/** The proxy against real sglang-sim engines: SGLang's own wire format, rid handling and abort_request. */
const SERVED = 'sim-served';
let engines: SimServer[] = [];
let gw: TestServer;
const pools = new UpstreamPools();
const client = new Agent();
const inFlight = new InFlightCounter();
const events: CompletionEvent[] = [];
const abortCalls: Array<Promise<number>> = [];
let targets: ProxyTarget[] = [];

beforeAll(async () => {
  // Slow decode so a stream is still running while the test looks at it.
  engines = await Promise.all(
    [0, 1].map(() =>
      startSimServer({ host: '127.0.0.1', port: 0, servedModelName: SERVED, simDecodeUsPerToken: 20_000 }),
    ),
  );
  await Promise.all(engines.map((e) => e.ready));
  targets = engines.map((e, i) => ({ id: `sim-${i}`, origin: e.url }));
  const pick = (excluding?: ReadonlySet<string>) =>
    targets.find((t) => !excluding?.has(t.id)) ?? new UisError({ code: 'no_replica', message: 'no engine' });
  const options = {
    pools,
    inFlight,
    hooks: {
      // What the gateway does with the hook: ask the engine to abort that rid.
      onClientAbort: (rid: string | string[], target: ProxyTarget) => {
        abortCalls.push(
          request(`${target.origin}/abort_request`, {
            method: 'POST',
            body: JSON.stringify({ rid }),
            headers: { 'content-type': 'application/json' },
            dispatcher: client,
          }).then(async (r) => {
            await r.body.dump();
            return r.statusCode;
          }),
        );
      },
      onComplete: (e: CompletionEvent) => events.push(e),
    },
  };
  const generate = createServingHandler(options, () => ({
    path: '/generate',
    pick,
    edit: GENERATE_EDIT,
  }));
  const chat = createServingHandler(options, () => ({
    path: '/v1/chat/completions',
    pick,
    edit: openAIEdit(SERVED),
  }));
  const routes = new FastRoutes()
    .add('POST', '/r/generate', generate)
    .add('POST', '/r/v1/chat/completions', chat);
  gw = await listen(
    createCombinedListener({
      serving: routes,
      fallback: (_req, res) => {
        res.writeHead(404).end();
      },
    }),
  );
});

afterAll(async () => {
  await gw?.close();
  await pools.close();
  await client.close();
  await Promise.all(engines.map((e) => e.close()));
});

async function post(path: string, body: unknown) {
  const r = await request(`${gw.url}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    dispatcher: client,
  });
  return { status: r.statusCode, headers: r.headers, json: (await r.body.json()) as Record<string, unknown> };
}

// Real engines decoding at 20 ms a token: room for a loaded machine beyond the 5 s default.
describe('proxy in front of sglang-sim', { timeout: 30_000 }, () => {
  it('forwards /generate without model/route_key and with an injected rid the engine uses', async () => {
    const r = await post('/r/generate', {
      model: 'alias',
      route_key: 'k',
      text: 'The capital of France is',
      sampling_params: { max_new_tokens: 3 },
    });
    expect(r.status).toBe(200);
    const meta = r.json.meta_info as { id: string; completion_tokens: number };
    expect(meta.completion_tokens).toBe(3);
    expect(meta.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(events.at(-1)?.rid).toBe(meta.id);
  });

  it('rewrites model for chat completions and keeps a client rid', async () => {
    const r = await post('/r/v1/chat/completions', {
      model: 'alias',
      rid: 'client-rid-1',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
    });
    expect(r.status).toBe(200);
    expect(r.json.model).toBe(SERVED);
    expect(events.at(-1)?.rid).toBe('client-rid-1');
  });

  it('relays SSE events while the engine is still generating', async () => {
    const req = httpRequest(`${gw.url}/r/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    req.end(
      JSON.stringify({
        model: 'alias',
        messages: [{ role: 'user', content: 'count' }],
        stream: true,
        max_tokens: 20,
      }),
    );
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    expect(res.headers['content-type']).toContain('text/event-stream');
    const [first] = (await once(res, 'data')) as [Buffer];
    expect(first.toString()).toMatch(/^data: \{/);
    // The first event is here and the engine has not finished the sequence: nothing was buffered.
    const running = engines.reduce((n, e) => n + e.stats().running, 0);
    expect(running).toBe(1);
    let text = first.toString();
    res.on('data', (c: Buffer) => {
      text += c.toString();
    });
    await once(res, 'end');
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(text.split('\n\n').filter((e) => e.startsWith('data: {')).length).toBeGreaterThanOrEqual(20);
  });

  it('aborts the engine request when the client disconnects mid-stream', async () => {
    const before = engines[0]!.stats().aborted;
    const req = httpRequest(`${gw.url}/r/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', () => {});
    req.end(
      JSON.stringify({
        text: 'tell me a long story',
        stream: true,
        sampling_params: { max_new_tokens: 500 },
      }),
    );
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    await once(res, 'data');
    const calls = abortCalls.length;
    req.destroy();
    await waitFor(() => abortCalls.length > calls, 10_000, 'the abort hook');
    expect(await abortCalls.at(-1)).toBe(200);
    await waitFor(
      () => engines[0]!.stats().aborted > before && engines[0]!.stats().running === 0,
      10_000,
      'engine abort',
    );
    await waitFor(() => inFlight.total === 0, 10_000, 'in-flight release');
  });

  it('retries an unreachable engine on another one', async () => {
    const dead: ProxyTarget = { id: 'dead', origin: `http://127.0.0.1:${await deadPort()}` };
    targets.unshift(dead);
    try {
      const r = await post('/r/generate', { text: 'x', sampling_params: { max_new_tokens: 1 } });
      expect(r.status).toBe(200);
      expect(events.at(-1)).toMatchObject({ attempts: 2, target: { id: 'sim-0' } });
    } finally {
      targets.shift();
    }
  });
});
