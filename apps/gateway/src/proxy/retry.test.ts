import { once } from 'node:events';
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net';
import { ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { deadPort, readAll } from '../testing/proxy.ts';
import {
  closeServing,
  echoEngine,
  gateway,
  openStream,
  post,
  type Seen,
  upstream,
} from '../testing/serving-harness.ts';
import { type RetryOptions, RetryPolicy } from './retry.ts';
import { UpstreamPools } from './upstream-pools.ts';

afterAll(closeServing);

/** An engine that takes the connection and the whole request, then drops it without a byte of answer: `close`
 * ends the connection (the proxy sees it closed), `reset` aborts it (ECONNRESET). */
async function droppingEngine(how: 'close' | 'reset') {
  let requests = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.once('data', () => {
      requests++;
      if (how === 'reset') socket.resetAndDestroy();
      else socket.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get requests() {
      return requests;
    },
  };
}
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of closers.splice(0)) await c();
});

/** A retry policy on a fake clock; jitter 0 unless a test sets it, so waits are exact. */
function onClock(options: Partial<RetryOptions>, random = () => 0) {
  const clock = new ManualClock();
  return { clock, retry: new RetryPolicy({ jitter: 0, ...options }, clock, random) };
}

describe('retry policy: waits', () => {
  it('grows by the multiplier up to the cap, and jitter takes up to its share off', () => {
    const exact = new RetryPolicy({
      initialBackoffMs: 100,
      backoffMultiplier: 2,
      maxBackoffMs: 500,
      jitter: 0,
    });
    expect([1, 2, 3, 4, 5].map((n) => exact.backoffMs(n))).toEqual([100, 200, 400, 500, 500]);
    const options = { initialBackoffMs: 100, backoffMultiplier: 2, maxBackoffMs: 500, jitter: 0.5 };
    expect(new RetryPolicy(options, undefined, () => 0).backoffMs(2)).toBe(200);
    expect(new RetryPolicy(options, undefined, () => 0.5).backoffMs(2)).toBe(150);
    expect(new RetryPolicy(options, undefined, () => 1).backoffMs(2)).toBe(100);
    expect(new RetryPolicy({ initialBackoffMs: 0 }).backoffMs(3)).toBe(0);
  });
});

describe('retries before the engine answered', () => {
  it('a refused connect is retried on a healthy replica after the configured wait', async () => {
    const seen: Seen[] = [];
    const good = await echoEngine(seen);
    const { clock, retry } = onClock({ initialBackoffMs: 40 });
    const gw = await gateway(
      [
        { id: 'dead', origin: `http://127.0.0.1:${await deadPort()}` },
        { id: 'good', origin: good.url },
      ],
      { extra: { retry } },
    );
    const answer = post(`${gw.url}/r/generate`, '{"text":"x"}');
    await clock.untilPending(1);
    expect(clock.pendingDelays()).toEqual([40]);
    // During the wait the next replica already holds the request (drain and least-outstanding see it).
    expect(gw.inFlight.get('good')).toBe(1);
    expect(gw.inFlight.get('dead')).toBe(0);
    await clock.advance(39);
    expect(seen).toHaveLength(0);
    await clock.advance(1);
    const r = await answer;
    expect(r.status).toBe(200);
    expect(seen).toHaveLength(1);
    await gw.completed(1);
    expect(gw.events[0]).toMatchObject({
      attempts: 2,
      retries: ['engine_unreachable'],
      target: { id: 'good' },
      outcome: 'ok',
    });
    expect(gw.inFlight.total).toBe(0);
  });

  it('a connection closed or reset before any response byte is retried, each wait as configured', async () => {
    const closes = await droppingEngine('close');
    const resets = await droppingEngine('reset');
    const seen: Seen[] = [];
    const good = await echoEngine(seen);
    const { clock, retry } = onClock({ initialBackoffMs: 100, backoffMultiplier: 3, maxBackoffMs: 250 });
    const gw = await gateway(
      [
        { id: 'closes', origin: closes.url },
        { id: 'resets', origin: resets.url },
        { id: 'good', origin: good.url },
      ],
      { extra: { retry } },
    );
    const answer = post(`${gw.url}/r/generate`, '{"text":"x"}');
    await clock.untilPending(1);
    expect(clock.pendingDelays()).toEqual([100]);
    expect([closes.requests, resets.requests]).toEqual([1, 0]);
    await clock.advance(99);
    expect(resets.requests).toBe(0);
    await clock.advance(1);
    await waitFor(() => resets.requests === 1);
    await clock.untilPending(1);
    // 100 * 3 = 300, capped at 250.
    expect(clock.pendingDelays()).toEqual([250]);
    await clock.advance(249);
    expect(seen).toHaveLength(0);
    await clock.advance(1);
    expect((await answer).status).toBe(200);
    await gw.completed(1);
    expect(gw.events[0]).toMatchObject({
      attempts: 3,
      retries: ['engine_unreachable', 'engine_unreachable'],
      target: { id: 'good' },
    });
  });

  it('answers the last error with the attempts once the retry budget is spent; no replica past it is tried', async () => {
    const engines = [
      await droppingEngine('close'),
      await droppingEngine('reset'),
      await droppingEngine('close'),
    ];
    const spare = await droppingEngine('close');
    const { clock, retry } = onClock({ maxRetries: 2, initialBackoffMs: 10 });
    const gw = await gateway(
      [...engines, spare].map((e, i) => ({ id: `e${i}`, origin: e.url })),
      { extra: { retry } },
    );
    const answer = post(`${gw.url}/r/generate`, '{}');
    for (let i = 0; i < 2; i++) {
      await clock.untilPending(1);
      await clock.advance(clock.pendingDelays()[0]!);
    }
    const r = await answer;
    expect(r.status).toBe(502);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.json().error).toMatchObject({
      code: 'engine_unreachable',
      details: { attempts: 3, engines: ['e0', 'e1', 'e2'] },
    });
    expect(r.json().error.message).toMatch(
      /^engine e2 at .* is unreachable: .*gave up after 3 attempts on e0, e1, e2/,
    );
    expect(engines.map((e) => e.requests)).toEqual([1, 1, 1]);
    expect(spare.requests).toBe(0);
    await gw.completed(1);
    expect(gw.events[0]).toMatchObject({ attempts: 3, status: 502, outcome: 'error' });
    expect(gw.inFlight.total).toBe(0);
  });

  it('maxRetries 0 turns retries off', async () => {
    const first = await droppingEngine('close');
    const second = await droppingEngine('close');
    const gw = await gateway(
      [
        { id: 'a', origin: first.url },
        { id: 'b', origin: second.url },
      ],
      { extra: { retry: new RetryPolicy({ maxRetries: 0 }) } },
    );
    const r = await post(`${gw.url}/r/generate`, '{}');
    expect(r.status).toBe(502);
    expect(r.json().error.details).toBeUndefined();
    expect([first.requests, second.requests]).toEqual([1, 0]);
  });

  it('a client that leaves during the wait ends the request; the next replica never sees it', async () => {
    const seen: Seen[] = [];
    const good = await echoEngine(seen);
    const { clock, retry } = onClock({ initialBackoffMs: 1000 });
    const gw = await gateway(
      [
        { id: 'dead', origin: `http://127.0.0.1:${await deadPort()}` },
        { id: 'good', origin: good.url },
      ],
      { extra: { retry } },
    );
    const { req, response } = openStream(`${gw.url}/r/generate`, '{"text":"x"}');
    req.on('error', () => undefined);
    response.catch(() => undefined);
    await clock.untilPending(1);
    req.destroy();
    await gw.completed(1);
    expect(gw.events[0]).toMatchObject({ outcome: 'client_abort', attempts: 2 });
    expect(clock.pending).toBe(0);
    await clock.advance(1000);
    expect(seen).toHaveLength(0);
    expect(gw.aborts).toEqual([]);
    expect(gw.inFlight.total).toBe(0);
  });
});

describe('no retry once the engine answered or may still be working', () => {
  it('an answer cut after its head, an engine 503 and a headers timeout are not sent elsewhere', async () => {
    let spareCalls = 0;
    const spare = await upstream((_req, res) => {
      spareCalls++;
      res.end('{}');
    });
    const cut = createNetServer((socket) =>
      socket.once('data', () => {
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"te');
        setImmediate(() => socket.destroy());
      }),
    );
    cut.listen(0, '127.0.0.1');
    await once(cut, 'listening');
    closers.push(() => new Promise<void>((resolve) => cut.close(() => resolve())));
    const busy = await upstream(async (req, res) => {
      await readAll(req);
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"error":"overloaded"}');
    });
    const silent = await upstream(() => {});
    const { clock, retry } = onClock({ initialBackoffMs: 1 });
    const cases = [
      {
        origin: `http://127.0.0.1:${(cut.address() as AddressInfo).port}`,
        status: 502,
        code: 'engine_response_incomplete',
      },
      { origin: busy.url, status: 503, code: undefined },
      { origin: silent.url, status: 504, code: 'engine_timeout' },
    ];
    for (const c of cases) {
      const gw = await gateway(
        [
          { id: 'first', origin: c.origin },
          { id: 'spare', origin: spare.url },
        ],
        { extra: { retry }, pools: new UpstreamPools({ headersTimeoutMs: 300 }) },
      );
      const r = await post(`${gw.url}/r/generate`, '{}');
      expect(r.status).toBe(c.status);
      if (c.code !== undefined) expect(r.json().error.code).toBe(c.code);
      await gw.completed(1);
      expect(gw.events[0]).toMatchObject({ attempts: 1, retries: [] });
      expect(gw.inFlight.total).toBe(0);
    }
    expect(clock.pending).toBe(0);
    expect(spareCalls).toBe(0);
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
  it('answers 502 when the retries fail too (two by default), or when no other engine exists', async () => {
    const both = await gateway([
      { id: 'd1', origin: `http://127.0.0.1:${await deadPort()}` },
      { id: 'd2', origin: `http://127.0.0.1:${await deadPort()}` },
      { id: 'd3', origin: `http://127.0.0.1:${await deadPort()}` },
      { id: 'd4', origin: `http://127.0.0.1:${await deadPort()}` },
    ]);
    const r = await post(`${both.url}/r/generate`, '{}');
    expect(r.status).toBe(502);
    expect(r.json().error).toMatchObject({
      code: 'engine_unreachable',
      details: { attempts: 3, engines: ['d1', 'd2', 'd3'] },
    });
    await both.completed(1);
    expect(both.events[0]).toMatchObject({ attempts: 3, target: { id: 'd3' } });
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
