import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@uis/sglang-engine/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { deadPort, listen, readAll } from '../../testing/proxy.ts';
import { UpstreamPools } from '../upstream-pools.ts';
import { errorCode, type UpstreamController, type UpstreamHandler } from './engine-pool.ts';

/** A TCP server that answers with exactly the bytes a test writes: the engine's side of the wire. */
async function rawEngine(onRequest: (socket: Socket, request: string, index: number) => void) {
  const sockets = new Set<Socket>();
  let requests = 0;
  let connections = 0;
  const server: Server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buf = '';
    socket.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end === -1) return;
        const length = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        const request = buf.slice(0, end + 4 + length);
        buf = buf.slice(end + 4 + length);
        onRequest(socket, request, requests++);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get connections() {
      return connections;
    },
    get requests() {
      return requests;
    },
    sockets,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

function pools(options?: ConstructorParameters<typeof UpstreamPools>[0]) {
  const p = new UpstreamPools(options);
  closers.push(() => p.close());
  return p;
}

/** Records what a handler is told, and lets the test act from inside the callbacks. */
function recorder(
  hooks: {
    onData?: (c: UpstreamController, chunk: Buffer) => void;
    onStart?: (c: UpstreamController) => void;
  } = {},
) {
  const seen = {
    starts: 0,
    status: 0,
    headers: {} as IncomingHttpHeaders,
    framing: '',
    data: [] as Buffer[],
    ended: false,
    error: undefined as Error | undefined,
  };
  let settle!: () => void;
  const done = new Promise<void>((r) => {
    settle = r;
  });
  const handler: UpstreamHandler = {
    onRequestStart() {
      seen.starts++;
    },
    onResponseStart(c, status, headers, framing) {
      seen.status = status;
      seen.headers = headers;
      seen.framing = framing;
      hooks.onStart?.(c);
    },
    onResponseData(c, chunk) {
      seen.data.push(Buffer.from(chunk));
      hooks.onData?.(c, chunk);
    },
    onResponseEnd() {
      seen.ended = true;
      settle();
    },
    onResponseError(_c, err) {
      seen.error = err;
      settle();
    },
  };
  return { seen, handler, done, text: () => Buffer.concat(seen.data).toString('latin1') };
}

const post = (path = '/generate', body = '{}') => ({
  path,
  headers: ['content-type', 'application/json'],
  body: Buffer.from(body),
});

describe('EnginePool', { timeout: 30_000 }, () => {
  it('writes one well-formed request and reads a sized answer, reusing the socket', async () => {
    const requests: string[] = [];
    const engine = await rawEngine((socket, request) => {
      requests.push(request);
      socket.write(
        'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}',
      );
    });
    closers.push(engine.close);
    const p = pools();
    for (let i = 0; i < 3; i++) {
      const r = recorder();
      p.get(engine.url).dispatch(post('/generate', `{"i":${i}}`), r.handler);
      await r.done;
      expect(r.seen).toMatchObject({ status: 200, framing: 'length', ended: true, starts: 1 });
      expect(r.text()).toBe('{"ok":true}');
    }
    expect(engine.connections).toBe(1);
    expect(p.churn.connects).toBe(1);
    expect(requests[2]).toBe(
      `POST /generate HTTP/1.1\r\nhost: ${new URL(engine.url).host}\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{"i":2}`,
    );
  });

  it('decodes a chunked answer, or relays it with its framing byte for byte when asked', async () => {
    const wire = '5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n';
    const engine = await rawEngine((socket) => {
      socket.write(
        'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n',
      );
      // Framing cut across writes, as a real engine's events arrive.
      setTimeout(() => socket.write(wire.slice(0, 9)), 5);
      setTimeout(() => socket.write(wire.slice(9)), 10);
    });
    closers.push(engine.close);
    const p = pools();
    const decoded = recorder();
    p.get(engine.url).dispatch(post(), decoded.handler);
    await decoded.done;
    expect(decoded.text()).toBe('hello world');
    const raw = recorder({ onStart: (c) => expect(c.relayChunked()).toBe(true) });
    p.get(engine.url).dispatch(post(), raw.handler);
    await raw.done;
    expect(raw.seen.ended).toBe(true);
    expect(raw.text()).toBe(wire);
    expect(engine.connections).toBe(1);
  });

  it('skips 1xx answers and reads a body that ends with the connection', async () => {
    const engine = await rawEngine((socket) => {
      socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\npart one, ');
      setTimeout(() => socket.end('part two'), 5);
    });
    closers.push(engine.close);
    const r = recorder();
    pools().get(engine.url).dispatch(post(), r.handler);
    await r.done;
    expect(r.seen).toMatchObject({ status: 200, framing: 'close', ended: true });
    expect(r.text()).toBe('part one, part two');
  });

  it('fails with a typed error when the engine is unreachable, answers garbage, or closes mid-answer', async () => {
    const p = pools();
    const refused = recorder();
    p.get(`http://127.0.0.1:${await deadPort()}`).dispatch(post(), refused.handler);
    await refused.done;
    expect(errorCode(refused.seen.error)).toBe('ECONNREFUSED');

    const garbage = await rawEngine((socket) => socket.write('SSH-2.0-OpenSSH\r\n\r\n'));
    closers.push(garbage.close);
    const bad = recorder();
    p.get(garbage.url).dispatch(post(), bad.handler);
    await bad.done;
    expect(errorCode(bad.seen.error)).toBe('UPSTREAM_BAD_RESPONSE');

    const cut = await rawEngine((socket) => {
      socket.end('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this');
    });
    closers.push(cut.close);
    const short = recorder();
    p.get(cut.url).dispatch(post(), short.handler);
    await short.done;
    expect(short.text()).toBe('only this');
    expect(errorCode(short.seen.error)).toBe('UPSTREAM_CLOSED');
    expect(short.seen.ended).toBe(false);
  });

  it('resends once on a fresh socket when the engine closed a kept-alive socket as it was reused', async () => {
    const engine = await rawEngine((socket, _request, index) => {
      if (index === 0) {
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        return;
      }
      if (index === 1) {
        socket.destroy(); // the idle-timeout race: closed without an answer
        return;
      }
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nagain');
    });
    closers.push(engine.close);
    const p = pools();
    const first = recorder();
    p.get(engine.url).dispatch(post(), first.handler);
    await first.done;
    const second = recorder();
    p.get(engine.url).dispatch(post(), second.handler);
    await second.done;
    expect(second.seen).toMatchObject({ ended: true, starts: 2 });
    expect(second.text()).toBe('again');
    expect(engine.connections).toBe(2);
  });

  it('drops a kept-alive socket the engine closed while it was idle, and serves the next request on a new one', async () => {
    const engine = await rawEngine((socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      setTimeout(() => socket.end(), 20); // the engine's own idle timeout, unannounced
    });
    closers.push(engine.close);
    // Our own idle expiry far away: only noticing the engine's close empties the pool.
    const p = pools({ keepAliveTimeoutMs: 60_000 });
    const first = recorder();
    p.get(engine.url).dispatch(post(), first.handler);
    await first.done;
    await waitFor(() => p.stats()[engine.url]!.connected === 0);
    expect(p.stats()[engine.url]).toMatchObject({ connected: 0, free: 0 });
    const second = recorder();
    p.get(engine.url).dispatch(post(), second.handler);
    await second.done;
    expect(second.seen).toMatchObject({ ended: true, starts: 1 });
    expect(engine.connections).toBe(2);
  });

  it('does not resend on a fresh socket: a connection dropped before the first answer is an error', async () => {
    const engine = await rawEngine((socket) => socket.destroy());
    closers.push(engine.close);
    const r = recorder();
    pools().get(engine.url).dispatch(post(), r.handler);
    await r.done;
    expect(['UPSTREAM_CLOSED', 'ECONNRESET']).toContain(errorCode(r.seen.error));
    expect(engine.requests).toBe(1);
  });

  it('times out waiting for headers and between body reads', async () => {
    const silent = await rawEngine(() => {});
    closers.push(silent.close);
    const stalls = await rawEngine((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n'),
    );
    closers.push(stalls.close);
    const p = pools({ headersTimeoutMs: 200, bodyTimeoutMs: 200 });
    const t0 = performance.now();
    const headers = recorder();
    p.get(silent.url).dispatch(post(), headers.handler);
    const body = recorder();
    p.get(stalls.url).dispatch(post(), body.handler);
    await Promise.all([headers.done, body.done]);
    expect(errorCode(headers.seen.error)).toBe('UPSTREAM_HEADERS_TIMEOUT');
    expect(errorCode(body.seen.error)).toBe('UPSTREAM_BODY_TIMEOUT');
    expect(body.text()).toBe('hi');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
    // The configured 200 ms, not the 2 h default; the sweep fires them in 50 ms ticks, which a loaded machine
    // stretches, hence the wide upper bound.
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it('closes idle sockets after the engine-announced keep-alive timeout minus a second', async () => {
    const engine = await rawEngine((socket) =>
      socket.write('HTTP/1.1 200 OK\r\nkeep-alive: timeout=1\r\ncontent-length: 0\r\n\r\n'),
    );
    closers.push(engine.close);
    const p = pools({ keepAliveTimeoutMs: 60_000 });
    const r = recorder();
    p.get(engine.url).dispatch(post(), r.handler);
    await r.done;
    // timeout=1 leaves no margin: the socket is not kept at all (the pool's own keep-alive is 60 s).
    expect(p.stats()[engine.url]).toMatchObject({ connected: 0, free: 0, running: 0 });
    await waitFor(() => engine.sockets.size === 0);
    expect(engine.sockets.size).toBe(0);
  });

  it('forgets an engine origin that has had no socket and no request for originIdleMs', async () => {
    const engine = await rawEngine((socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n'));
    closers.push(engine.close);
    const p = pools({ originIdleMs: 100 });
    const r = recorder();
    p.get(engine.url).dispatch(post(), r.handler);
    await r.done;
    expect(p.origins).toEqual([engine.url]);
    await waitFor(() => p.origins.length === 0);
    expect(p.origins).toEqual([]);
    // A later request simply opens a new pool.
    const again = recorder();
    p.get(engine.url).dispatch(post(), again.handler);
    await again.done;
    expect(again.seen.ended).toBe(true);
  });

  it('queues requests beyond the connection limit and serves them in order', async () => {
    const engine = await rawEngine((socket, request) => {
      const n = /"n":(\d+)/.exec(request)![1];
      setTimeout(() => socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${n!.length}\r\n\r\n${n}`), 20);
    });
    closers.push(engine.close);
    const p = pools({ connections: 2 });
    const rs = Array.from({ length: 6 }, () => recorder());
    rs.forEach((r, n) => {
      p.get(engine.url).dispatch(post('/generate', `{"n":${n}}`), r.handler);
    });
    expect(p.stats()[engine.url]).toMatchObject({ pending: 4 });
    await Promise.all(rs.map((r) => r.done));
    expect(rs.map((r) => r.text())).toEqual(['0', '1', '2', '3', '4', '5']);
    expect(engine.connections).toBe(2);
  });

  it('aborts a queued or running request: the handler hears once, the socket is not reused', async () => {
    const engine = await rawEngine((socket) =>
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'),
    );
    closers.push(engine.close);
    // Our own idle expiry far away: a socket put back after the abort would stay open.
    const p = pools({ connections: 1, keepAliveTimeoutMs: 60_000 });
    const running = recorder({ onStart: (c) => setTimeout(() => c.abort(new Error('client left')), 5) });
    const queued = recorder();
    p.get(engine.url).dispatch(post(), running.handler);
    const c = p.get(engine.url).dispatch(post(), queued.handler);
    c.abort(new Error('never mind'));
    await queued.done;
    expect(queued.seen.error?.message).toBe('never mind');
    await running.done;
    expect(running.seen.error?.message).toBe('client left');
    await waitFor(() => engine.sockets.size === 0);
    expect(engine.sockets.size).toBe(0);
  });

  it('pauses reading while the handler holds back, so the engine has to wait', async () => {
    // The answer (32 MiB) is larger than loopback's socket buffers can hold: while the handler holds back, the
    // engine ends up waiting for 'drain' with chunks still to write, and no data reaches the handler.
    const big = 'x'.repeat(64 * 1024);
    const chunks = 512;
    let engineWaiting = false;
    let chunksLeft = chunks;
    const engine = await rawEngine((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${big.length * chunks}\r\n\r\n`);
      const pump = () => {
        engineWaiting = false;
        while (chunksLeft > 0) {
          chunksLeft--;
          if (!socket.write(big)) {
            engineWaiting = true;
            socket.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
    closers.push(engine.close);
    let paused: UpstreamController | undefined;
    let dataWhilePaused = 0;
    const r = recorder({
      onData: (c, chunk) => {
        if (paused === undefined) {
          paused = c;
          c.pause();
        } else if (dataWhilePaused >= 0) {
          dataWhilePaused += chunk.length;
        }
      },
    });
    pools().get(engine.url).dispatch(post(), r.handler);
    await waitFor(() => paused !== undefined && engineWaiting && chunksLeft > 0);
    expect(paused).toBeDefined();
    expect(engineWaiting).toBe(true);
    expect(chunksLeft).toBeGreaterThan(0);
    expect(dataWhilePaused).toBe(0);
    dataWhilePaused = -1;
    paused?.resume();
    await r.done;
    expect(r.seen.ended).toBe(true);
    expect(Buffer.concat(r.seen.data).length).toBe(big.length * chunks);
  });

  it('fails running requests when the pools close, and waits for the sockets', async () => {
    const engine = await rawEngine(() => {});
    closers.push(engine.close);
    const p = new UpstreamPools();
    const r = recorder();
    p.get(engine.url).dispatch(post(), r.handler);
    await waitFor(() => engine.sockets.size > 0);
    await p.close();
    await r.done;
    expect(errorCode(r.seen.error)).toBe('UPSTREAM_DESTROYED');
    expect(p.churn.disconnects).toBe(1);
  });

  it('serves a buffered request() for control-plane calls, honouring an abort signal', async () => {
    const engine = await listen(async (req, res) => {
      const body = await readAll(req);
      if (req.url === '/slow') return;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ echo: JSON.parse(body.toString()) }));
    });
    closers.push(engine.close);
    const pool = pools().get(engine.url);
    const r = await pool.request(post('/echo', '{"a":1}'));
    expect(r.statusCode).toBe(200);
    expect(JSON.parse(r.body.toString())).toEqual({ echo: { a: 1 } });
    await expect(pool.request(post('/slow'), AbortSignal.timeout(50))).rejects.toThrow();
  });

  it('speaks TLS to an https engine, verified against the given CA, and refuses an unknown certificate', async (ctx) => {
    const dir = mkdtempSync(join(tmpdir(), 'uis-tls-'));
    try {
      try {
        execFileSync(
          'openssl',
          [
            'req',
            '-x509',
            '-newkey',
            'rsa:2048',
            '-nodes',
            '-days',
            '1',
            '-subj',
            '/CN=localhost',
            '-addext',
            'subjectAltName=IP:127.0.0.1',
            '-keyout',
            join(dir, 'key.pem'),
            '-out',
            join(dir, 'cert.pem'),
          ],
          { stdio: 'ignore' },
        );
      } catch (e) {
        console.log(`[https engine test skipped] openssl cannot make a test certificate: ${String(e)}`);
        ctx.skip();
        return;
      }
      const cert = readFileSync(join(dir, 'cert.pem'));
      const server = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (req, res) => {
        req.resume();
        req.on('end', () => res.end('{"tls":true}'));
      });
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      closers.push(
        () =>
          new Promise<void>((r) => {
            server.closeAllConnections();
            server.close(() => r());
          }),
      );
      const origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const trusted = pools({ tls: { ca: cert } }).get(origin);
      for (let i = 0; i < 2; i++) {
        const r = await trusted.request(post());
        expect(r.statusCode).toBe(200);
        expect(r.body.toString()).toBe('{"tls":true}');
      }
      expect(trusted.stats()).toMatchObject({ connected: 1 });
      await expect(pools().get(origin).request(post())).rejects.toMatchObject({
        code: 'DEPTH_ZERO_SELF_SIGNED_CERT',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
