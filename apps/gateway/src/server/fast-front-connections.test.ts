import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { type Answer, bothFronts, openRaw } from '../testing/raw-http.ts';
import type { UisServer } from './uis-server.ts';

// The fast serving front's connections under stress, side by side with node:http on the same plane: heads cut at
// every byte, slow clients (the head and body deadline), clients that leave or reset mid-request, a client that
// never reads a long stream (backpressure), and many short connections (nothing left behind). Raw sockets on
// 127.0.0.1; waits are on conditions, never on time.

const SERVING = 'fast-front-connections-token';
const BODY_TIMEOUT_MS = 2000;
type Front = 'fast' | 'node';
const FRONTS: Front[] = ['fast', 'node'];
const logs: Record<Front, string[]> = { fast: [], node: [] };
const fronts = bothFronts({
  simDecodeUsPerToken: 50,
  server: {
    adminToken: 'fast-front-connections-admin',
    servingToken: SERVING,
    maxBodyBytes: 4096,
    bodyTimeoutMs: BODY_TIMEOUT_MS,
    healthProbeMs: 0,
    accessLog: true,
  },
  extra: (front) => ({
    logger: pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          logs[front].push(...chunk.toString().split('\n').filter(Boolean));
          done();
        },
      }),
    ),
  }),
});
/** Each front's server, its node:http server, the sockets it accepted and its log lines. */
const servers = {} as Record<
  Front,
  { server: UisServer; port: number; http: Server; sockets: Socket[]; log: string[] }
>;
beforeAll(() => {
  for (const front of FRONTS) {
    const { server, port } = fronts[front];
    const http = (server as unknown as { server: Server }).server;
    const sockets: Socket[] = [];
    http.on('connection', (s: Socket) => sockets.push(s));
    servers[front] = { server, port, http, sockets, log: logs[front] };
  }
});
const open = openRaw;

/** Writes `bytes` and lets the event loop turn, so the next write reaches the server as another read. */
async function write(socket: Socket, bytes: string | Buffer): Promise<void> {
  await new Promise<void>((r) => socket.write(bytes, () => setImmediate(r)));
}

const auth = `Authorization: Bearer ${SERVING}\r\n`;
const gen = (tokens: number) => JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: tokens } });
function post(path: string, body: string, extra = ''): string {
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
const tokensOf = (a: Answer | undefined) =>
  a === undefined ? -1 : (JSON.parse(a.body.toString()) as { output_ids: number[] }).output_ids.length;
const longStream = JSON.stringify({
  messages: [{ role: 'user', content: 'x' }],
  max_tokens: 200_000,
  ignore_eos: true,
  stream: true,
});
const idle = (front: Front) =>
  expect.poll(() => servers[front].server.inFlight(), { timeout: 30_000 }).toBe(0);

describe('fast front: fragmentation', { timeout: 120_000 }, () => {
  it('a request cut in two at every byte of its head (and one byte at a time) is answered on one connection', async () => {
    const { socket, reader } = await open(servers.fast.port);
    const bytes = post('/rollout/generate', gen(2), 'X-Request-Id: frag-1\r\n');
    const headEnd = bytes.indexOf('\r\n\r\n') + 4;
    for (let cut = 1; cut <= headEnd; cut++) {
      await write(socket, bytes.slice(0, cut));
      await write(socket, bytes.slice(cut));
      const a = await reader.next();
      expect({ cut, status: a?.status, tokens: tokensOf(a) }).toEqual({ cut, status: 200, tokens: 2 });
    }
    for (const c of bytes) await write(socket, c);
    expect(tokensOf(await reader.next())).toBe(2);
    socket.destroy();
  });
});

describe.each(FRONTS)('%s front: slow and vanishing clients', { timeout: 60_000 }, (front) => {
  const deadline = {
    status: 408,
    code: 'request_timeout',
    message: "the request (headers and body) did not arrive within the gateway's deadline; send it faster",
  };
  const refusal = (a: Answer | undefined) => {
    const err = (JSON.parse(a?.body.toString() ?? '{}') as { error?: { code: string; message: string } })
      .error;
    return { status: a?.status, code: err?.code, message: err?.message };
  };

  it('a head that never ends gets 408 at the head deadline, then the close', async () => {
    const { socket, reader } = await open(servers[front].port);
    await write(socket, `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}X-Slow: a`);
    expect(refusal(await reader.next())).toEqual(deadline);
    await expect.poll(() => reader.closed).toBe(true);
  });

  it('a connection that never sends a byte is closed at the head deadline', async () => {
    // node counts its head deadline from the accept; the fast front held such a connection for the idle timeout.
    const { reader } = await open(servers[front].port);
    expect(refusal(await reader.next())).toEqual(deadline);
    await expect.poll(() => reader.closed).toBe(true);
  });

  it('a body that never ends gets 408 at the request deadline, then the close', async () => {
    const { socket, reader } = await open(servers[front].port);
    await write(socket, post('/rollout/generate', gen(1)).slice(0, -4));
    expect(refusal(await reader.next())).toEqual(deadline);
    await expect.poll(() => reader.closed).toBe(true);
    await idle(front);
  });

  it('a reset in the middle of a body or of a stream leaves nothing in flight and the server serving', async () => {
    const mid = await open(servers[front].port);
    await write(mid.socket, post('/rollout/generate', gen(1)).slice(0, -10));
    mid.socket.resetAndDestroy();
    const streaming = await open(servers[front].port);
    streaming.socket.write(post('/rollout/v1/chat/completions', longStream));
    await new Promise((r) => streaming.socket.once('data', r));
    streaming.socket.resetAndDestroy();
    await idle(front);
    const after = await open(servers[front].port);
    after.socket.write(post('/rollout/generate', gen(1)));
    expect((await after.reader.next())?.status).toBe(200);
    after.socket.destroy();
  });

  it('a client gone with a second request pipelined behind a stream: neither runs on', async () => {
    const { socket } = await open(servers[front].port);
    socket.write(post('/rollout/v1/chat/completions', longStream) + post('/rollout/generate', gen(100_000)));
    await new Promise((r) => socket.once('data', r));
    socket.destroy();
    await idle(front);
  });

  it('a client that never reads a long stream holds the gateway to a bounded buffer', async () => {
    const before = servers[front].sockets.length;
    const { socket } = await open(servers[front].port);
    socket.write(post('/rollout/v1/chat/completions', longStream));
    await expect.poll(() => servers[front].sockets.length).toBeGreaterThan(before);
    const served = servers[front].sockets.at(-1)!;
    socket.pause();
    // The kernel's buffers fill first; from then on the gateway holds what it could not write.
    await expect.poll(() => served.writableLength, { timeout: 30_000 }).toBeGreaterThan(0);
    // While another client reads a whole 20k-token stream from the same engine, the unread one's buffer is
    // sampled at each of its chunks.
    let most = 0;
    const other = await open(servers[front].port);
    other.socket.on('data', () => {
      most = Math.max(most, served.writableLength);
    });
    other.socket.write(post('/rollout/v1/chat/completions', longStream.replace('200000', '20000')));
    expect((await other.reader.next())?.status).toBe(200);
    other.socket.destroy();
    expect(servers[front].server.inFlight()).toBe(1);
    // A relay that ignored backpressure would hold megabytes here (200k events, ~150 bytes each, at 50 us a token).
    expect(most).toBeLessThan(1024 * 1024);
    socket.destroy();
    await idle(front);
  });
});

describe.each(FRONTS)('%s front: a client that pipelines and never reads', { timeout: 60_000 }, (front) => {
  it('is held to a bounded buffer of answers: no request is read while the answers before it wait', async () => {
    const before = servers[front].sockets.length;
    const { socket } = await open(servers[front].port);
    await expect.poll(() => servers[front].sockets.length).toBeGreaterThan(before);
    const served = servers[front].sockets.at(-1)!;
    socket.pause();
    // Refused before any token is checked (403, ~300 bytes each): 40k of them are ~12 MB of answers, well over
    // what the kernel's loopback buffers take; the ~7 MB of requests fit in them while the server does not read.
    const one = post('/rollout/generate', '{}').replace('Host: 127.0.0.1', 'Host: evil.example');
    let most = 0;
    for (let i = 0; i < 40; i++) {
      await write(socket, one.repeat(1000));
      most = Math.max(most, served.writableLength);
    }
    expect(most).toBeLessThan(1024 * 1024);
    socket.destroy();
  });
});

describe('fast front: nothing left behind', { timeout: 120_000 }, () => {
  const connections = () =>
    new Promise<number>((r, j) => servers.fast.http.getConnections((e, n) => (e ? j(e) : r(n))));
  const timers = () => process.getActiveResourcesInfo().filter((h) => h === 'Timeout').length;

  it('many short connections (fast, handed to node, cut mid-head) leave no socket, timer or listener', async () => {
    const timers0 = timers();
    const chunked = `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${gen(1).length.toString(16)}\r\n${gen(1)}\r\n0\r\n\r\n`;
    for (let i = 0; i < 150; i++) {
      const { socket, reader } = await open(servers.fast.port);
      const kind = i % 3;
      if (kind === 2) {
        await write(socket, post('/rollout/generate', gen(1)).slice(0, 30));
        socket.destroy();
        continue;
      }
      socket.write(kind === 0 ? post('/rollout/generate', gen(1), 'Connection: close\r\n') : chunked);
      expect((await reader.next())?.status).toBe(200);
      socket.destroy();
    }
    await expect.poll(connections, { timeout: 30_000 }).toBe(0);
    await expect.poll(() => servers.fast.http.listenerCount('connection')).toBe(2);
    expect(timers()).toBeLessThanOrEqual(timers0 + 2);
  });

  it('many requests on one kept-alive connection add no listener to its socket', async () => {
    const { socket, reader } = await open(servers.fast.port);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    socket.write(post('/rollout/generate', gen(1)));
    await reader.next();
    const served = servers.fast.sockets.at(-1)!;
    const count = () => served.eventNames().map((e) => `${String(e)}:${served.listenerCount(e)}`);
    const first = count();
    for (let i = 0; i < 30; i++) {
      socket.write(
        post(
          '/rollout/v1/chat/completions',
          JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 2, stream: true }),
        ),
      );
      expect((await reader.next())?.status).toBe(200);
    }
    expect(count()).toEqual(first);
    process.off('warning', onWarning);
    expect(warnings).not.toContain('MaxListenersExceededWarning');
    socket.destroy();
  });
});

describe('fast front vs node: what operators see', { timeout: 60_000 }, () => {
  const requests = [
    post('/rollout/generate', gen(2), 'X-Request-Id: same-1\r\n'),
    post('/rollout/generate', '{bad', 'X-Request-Id: same-2\r\n'),
    post(
      '/rollout/v1/chat/completions',
      JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 3, stream: true }),
      'X-Request-Id: same-3\r\n',
    ),
    post('/rollout/generate', JSON.stringify({ text: 'x'.repeat(5000) }), 'X-Request-Id: same-4\r\n'),
  ];
  const servedCounts = async (front: Front) =>
    (
      await fetch(`http://127.0.0.1:${servers[front].port}/metrics`, {
        headers: { authorization: `Bearer ${SERVING}` },
      }).then((r) => r.text())
    )
      .split('\n')
      .filter((l) => l.startsWith('uis_requests_total') || l.startsWith('uis_generation_tokens_total'))
      .map((l) => l.split(' ') as [string, string]);
  /** What the requests added to each counter. */
  const added = (before: Array<[string, string]>, after: Array<[string, string]>) => {
    const was = new Map(before);
    return Object.fromEntries(
      after.map(([k, v]) => [k, Number(v) - Number(was.get(k) ?? 0)]).filter(([, d]) => d !== 0),
    );
  };

  it('the same access lines and request counts for the same requests', async () => {
    const seen: Record<Front, { log: unknown[]; metrics: unknown }> = {} as never;
    for (const front of FRONTS) {
      const from = servers[front].log.length;
      const before = await servedCounts(front);
      for (const r of requests) {
        const { socket, reader } = await open(servers[front].port);
        socket.write(r);
        await reader.next();
        socket.destroy();
      }
      await idle(front);
      const lines = servers[front].log.slice(from).map((l) => JSON.parse(l) as Record<string, unknown>);
      seen[front] = {
        log: lines
          .filter((l) => l.access === true)
          .map(
            ({ time: _t, pid: _p, hostname: _h, latency_ms: _l, ttft_ms: ttft, replica: _r, ...rest }) => ({
              ...rest,
              ttft: ttft === null ? null : 'set',
            }),
          ),
        metrics: added(before, await servedCounts(front)),
      };
    }
    expect(seen.fast.log.length).toBe(requests.length);
    expect(seen.fast).toEqual(seen.node);
  });
});
