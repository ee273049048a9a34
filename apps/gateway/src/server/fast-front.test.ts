import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { type Answer, bothFronts, openRaw } from '../testing/raw-http.ts';
import { FastResponse } from './fast-message.ts';

// The fast serving front against node:http: the same request bytes through a server with `front: fast` and one with
// `front: node` get the same status, the same JSON error (code, path, message) and, for refusals, the same body.
// Malformed and smuggling-shaped requests are outside the fast parser's subset: node's parser must answer them on
// both servers alike.

const SERVING = 'fast-front-serving-token';
const LIMIT = 2048;
const servers = bothFronts({
  simDecodeUsPerToken: 1000,
  server: {
    adminToken: 'fast-front-admin-token',
    servingToken: SERVING,
    maxBodyBytes: LIMIT,
    healthProbeMs: 0,
  },
});
const open = openRaw;

/** The first answer to `bytes` on a fresh connection. */
async function send(port: number, bytes: string | Buffer): Promise<Answer | undefined> {
  const { socket, reader } = await open(port);
  socket.write(bytes);
  const a = await reader.next();
  socket.destroy();
  return a;
}

const auth = `Authorization: Bearer ${SERVING}\r\n`;
const gen = (tokens: number) => JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: tokens } });
/** A request with a correct Content-Length. */
function post(path: string, body: string, extra = '', host = '127.0.0.1'): string {
  return `POST ${path} HTTP/1.1\r\nHost: ${host}\r\n${auth}Content-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
const chat = JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 3, stream: true });
const big = JSON.stringify({ text: 'x'.repeat(LIMIT) });

// biome-ignore format: one line per case keeps the table readable
const corpus: Array<{ name: string; bytes: string | Buffer }> = [
  { name: 'generate', bytes: post('/rollout/generate', gen(2)) },
  { name: 'streamed chat', bytes: post('/rollout/v1/chat/completions', chat) },
  { name: 'completions, query string', bytes: post('/rollout/v1/completions?x=1', JSON.stringify({ prompt: 'a', max_tokens: 2 })) },
  { name: 'invalid JSON', bytes: post('/rollout/generate', '{bad') },
  { name: 'JSON array', bytes: post('/rollout/generate', '[1]') },
  { name: 'unknown model', bytes: post('/rollout/v1/chat/completions', JSON.stringify({ model: 'nope', messages: [] })) },
  { name: 'no token', bytes: post('/rollout/generate', gen(1)).replace(auth, '') },
  { name: 'wrong token', bytes: post('/rollout/generate', gen(1)).replace(SERVING, 'wrong') },
  { name: 'Host not allowed', bytes: post('/rollout/generate', gen(1), '', 'evil.example') },
  { name: 'no Host', bytes: post('/rollout/generate', gen(1)).replace('Host: 127.0.0.1\r\n', '') },
  { name: 'body over the limit', bytes: post('/rollout/generate', big) },
  { name: 'Content-Length over the limit, no body', bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Length: 999999999\r\n\r\n` },
  { name: 'chunked body', bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${gen(1).length.toString(16)}\r\n${gen(1)}\r\n0\r\n\r\n` },
  { name: 'Content-Length and Transfer-Encoding', bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n` },
  { name: 'two different Content-Lengths', bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x` },
  { name: 'two equal Content-Lengths', bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}` },
  { name: 'signed Content-Length', bytes: post('/rollout/generate', '{}').replace('Content-Length: 2', 'Content-Length: +2') },
  { name: 'Content-Length with a space inside', bytes: post('/rollout/generate', '{}').replace('Content-Length: 2', 'Content-Length: 2 0') },
  { name: 'hex Content-Length', bytes: post('/rollout/generate', '{}').replace('Content-Length: 2', 'Content-Length: 0x2') },
  { name: 'space before the colon', bytes: post('/rollout/generate', '{}').replace('Content-Length:', 'Content-Length :') },
  { name: 'obs-fold', bytes: post('/rollout/generate', '{}', 'X-Folded: a\r\n b\r\n') },
  { name: 'bare LF line ends', bytes: post('/rollout/generate', '{}').replaceAll('\r\n', '\n') },
  { name: 'control byte in a value', bytes: post('/rollout/generate', '{}', 'X-Bad: a\x01b\r\n') },
  { name: 'byte above ASCII in a value', bytes: Buffer.concat([Buffer.from(`POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}X-Utf: `), Buffer.from([0xc3, 0xa9]), Buffer.from('\r\nContent-Length: 2\r\n\r\n{}')]) },
  { name: 'Expect: 100-continue', bytes: post('/rollout/generate', gen(1), 'Expect: 100-continue\r\n') },
  { name: 'Upgrade', bytes: post('/rollout/generate', gen(1), 'Connection: Upgrade\r\nUpgrade: h2c\r\n') },
  { name: 'HTTP/1.0', bytes: post('/rollout/generate', gen(1)).replace('HTTP/1.1', 'HTTP/1.0') },
  { name: 'lower-case method', bytes: post('/rollout/generate', gen(1)).replace('POST', 'post') },
  { name: 'absolute-form target', bytes: post('/rollout/generate', gen(1)).replace('POST /', 'POST http://127.0.0.1/') },
  { name: 'GET on a serving route', bytes: `GET /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n` },
  { name: 'POST to an unknown path', bytes: post('/rollout/nope', gen(1)) },
  { name: 'no Content-Length', bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n` },
  { name: 'headers over the limit', bytes: post('/rollout/generate', gen(1), `X-Big: ${'a'.repeat(20_000)}\r\n`) },
  { name: 'NUL in the request line', bytes: post('/rollout/gen\x00erate', gen(1)) },
  { name: 'Connection: close', bytes: post('/rollout/generate', gen(1), 'Connection: close\r\n') },
];

/** What must match across fronts: for refusals the whole body, for answers the shape. */
function comparable(a: Answer | undefined): unknown {
  if (a === undefined) return 'closed without an answer';
  const type = a.headers['content-type'] ?? '';
  if (a.status >= 400) {
    return {
      status: a.status,
      type,
      body: type.startsWith('application/json') ? JSON.parse(a.body.toString()) : '',
    };
  }
  if (type.startsWith('text/event-stream')) {
    const text = a.body.toString();
    return { status: a.status, type, events: text.split('\n\n').filter((e) => e.startsWith('data:')).length };
  }
  return { status: a.status, type, keys: Object.keys(JSON.parse(a.body.toString()) as object).sort() };
}

describe('fast front vs node:http', { timeout: 60_000 }, () => {
  it.each(corpus)('$name: the same answer through both fronts', async ({ bytes }) => {
    const fast = await send(servers.fast.port, bytes);
    const node = await send(servers.node.port, bytes);
    expect(comparable(fast)).toEqual(comparable(node));
  });

  it('the corpus covers answers, refusals and node parser errors', async () => {
    const statuses = new Set<number>();
    for (const { bytes } of corpus) statuses.add((await send(servers.fast.port, bytes))?.status ?? 0);
    for (const s of [200, 400, 401, 403, 404, 405, 413, 431]) expect(statuses).toContain(s);
  });
});

describe('fast front connections', { timeout: 60_000 }, () => {
  it('answers pipelined requests in order on one kept-alive connection, then hands the rest to node', async () => {
    const { socket, reader } = await open(servers.fast.port);
    // Three fast requests in one write, each asking a different number of tokens, then a chunked one (node's).
    const chunked = `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${gen(4).length.toString(16)}\r\n${gen(4)}\r\n0\r\n\r\n`;
    socket.write(
      post('/rollout/generate', gen(3)) +
        post('/rollout/generate', gen(1)) +
        post('/rollout/generate', gen(2)) +
        chunked,
    );
    const tokens: number[] = [];
    for (let i = 0; i < 4; i++) {
      const a = await reader.next();
      expect(a?.status).toBe(200);
      expect(a?.headers.connection).toBe('keep-alive');
      tokens.push((JSON.parse(a!.body.toString()) as { output_ids: number[] }).output_ids.length);
    }
    expect(tokens).toEqual([3, 1, 2, 4]);
    // node:http keeps the connection: a later request on it is answered too.
    socket.write(post('/rollout/generate', gen(2)));
    expect((await reader.next())?.status).toBe(200);
    socket.destroy();
  });

  it('closes after an answer to Connection: close, and reads a refused body to its end before the next request', async () => {
    const { socket, reader } = await open(servers.fast.port);
    // A refusal (no token) answered before its body is read: the body is skipped, the next request is served.
    const head = post('/rollout/generate', gen(5)).replace(auth, '');
    const cut = head.indexOf('\r\n\r\n') + 4;
    socket.write(head.slice(0, cut));
    expect((await reader.next())?.status).toBe(401);
    socket.write(head.slice(cut) + post('/rollout/generate', gen(1), 'Connection: close\r\n'));
    const a = await reader.next();
    expect(a?.status).toBe(200);
    expect(a?.headers.connection).toBe('close');
    expect(await reader.next()).toBeUndefined();
  });

  it('aborts the engine request when the client leaves mid-stream', async () => {
    const { socket, reader } = await open(servers.fast.port);
    const long = JSON.stringify({
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 5000,
      ignore_eos: true,
      stream: true,
    });
    socket.write(post('/rollout/v1/chat/completions', long));
    socket.once('data', () => socket.destroy());
    await reader.next();
    const counted = async () =>
      (
        await fetch(`http://127.0.0.1:${servers.fast.port}/metrics`, {
          headers: { authorization: `Bearer ${SERVING}` },
        }).then((r) => r.text())
      ).match(
        /uis_aborted_requests_total\{role="rollout",model="policy",reason="client_disconnect"\} (\d+)/,
      )?.[1];
    await expect.poll(counted, { timeout: 30_000 }).toBe('1');
    expect(servers.fast.server.inFlight()).toBe(0);
  });
});

describe('FastResponse heads', () => {
  const owner = { ending: () => {} };
  const res = () => new FastResponse({} as Socket, true, 'Connection: keep-alive\r\n', owner);

  /** A response on a socket that records each write (one entry per socket write call). */
  function recorded() {
    const writes: string[] = [];
    const socket = {
      destroyed: false,
      writable: true,
      write: (b: Buffer | string) => writes.push(typeof b === 'string' ? b : b.toString('latin1')) > 0,
    };
    return {
      writes,
      res: new FastResponse(socket as unknown as Socket, true, 'Connection: keep-alive\r\n', owner),
    };
  }

  it('writes a sized answer, head and body, in one socket write', () => {
    const { writes, res } = recorded();
    res.writeHead(200, ['content-type', 'application/json', 'content-length', '2', 'date', 'D']);
    res.end(Buffer.from('{}'));
    expect(writes).toEqual([
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\ndate: D\r\nConnection: keep-alive\r\n\r\n{}',
    ]);
  });

  it('writes each chunk of a framed stream in one socket write: the head with the first, the last chunk with the end', () => {
    const { writes, res } = recorded();
    res.writeHead(200, ['content-type', 'text/event-stream', 'date', 'D']);
    res.write(Buffer.from('data: 1\n\n'));
    res.write(Buffer.alloc(0));
    res.write('data: 2\n\n');
    res.end(Buffer.from('data: [DONE]\n\n'));
    expect(writes).toEqual([
      'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ndate: D\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n9\r\ndata: 1\n\n\r\n',
      '9\r\ndata: 2\n\n\r\n',
      'e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n',
    ]);
    const ended = recorded();
    ended.res.writeHead(204, { date: 'D' });
    ended.res.end();
    expect(ended.writes).toEqual(['HTTP/1.1 204 No Content\r\ndate: D\r\nConnection: keep-alive\r\n\r\n']);
  });

  it('refuses a header value or name that would inject a header, as node does', () => {
    expect(() => res().writeHead(200, ['x-weight-version', 'v1\r\nset-cookie: a=b'])).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_CHAR' }),
    );
    expect(() => res().writeHead(200, { 'x bad': '1' })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_HTTP_TOKEN' }),
    );
  });
});
