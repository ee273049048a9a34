import { describe, expect, it } from 'vitest';
import { type Answer, bothFronts, openRaw } from '../testing/raw-http.ts';

// An adversarial review of the fast serving front (issue 28): raw bytes over real sockets on 127.0.0.1, through a
// server with `front: fast` and one with `front: node` on the same plane. Every case reads the answers a client gets
// on one connection, then sends a probe request on it: the same answers and the same connection state after them
// (the probe answered, or the connection closed) mean the two fronts framed the bytes alike (no desync).

const SERVING = 'fast-front-adversarial-token';
const LIMIT = 2048;
const servers = bothFronts({
  simDecodeUsPerToken: 200,
  server: {
    adminToken: 'fast-front-adversarial-admin',
    servingToken: SERVING,
    maxBodyBytes: LIMIT,
    healthProbeMs: 0,
  },
});
const open = openRaw;

const auth = `Authorization: Bearer ${SERVING}\r\n`;
const gen = (tokens: number) => JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: tokens } });
function post(path: string, body: string, extra = ''): string {
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
/** A fast request with its head edited by `edit` (the body `{}` unless given). */
function edited(edit: (head: string) => string, body = gen(1)): string {
  const head = post('/rollout/generate', body).slice(0, -body.length);
  return edit(head) + body;
}
const PROBE = post('/rollout/generate', gen(3));

/** What must match across fronts: the status, for JSON refusals the whole body, for answers their shape. */
function comparable(a: Answer | undefined): unknown {
  if (a === undefined) return 'closed';
  const type = a.headers['content-type'] ?? '';
  if (a.status >= 400)
    return {
      status: a.status,
      body: type.startsWith('application/json') ? JSON.parse(a.body.toString()) : '',
    };
  const json = JSON.parse(a.body.toString()) as { output_ids?: number[] };
  return { status: a.status, tokens: json.output_ids?.length, close: a.headers.connection === 'close' };
}

interface Case {
  name: string;
  /** The bytes, in one write (or one write per element). */
  bytes: string | Buffer | Array<string | Buffer>;
  /** Answers to read before the probe. */
  answers: number;
  /** End the client's side after the bytes (a body cut short). */
  halfClose?: boolean;
  /** A difference kept: why, and what each front answers. */
  differs?: { why: string; fast: unknown[]; node: unknown[] };
}

/** The answers one connection gets to `c`, then the probe's answer (or `closed`). */
async function exchange(port: number, c: Case): Promise<unknown[]> {
  const { socket, reader } = await open(port);
  const parts = Array.isArray(c.bytes) ? c.bytes : [c.bytes];
  for (const p of parts) await new Promise<void>((r) => socket.write(p, () => setImmediate(r)));
  if (c.halfClose) socket.end();
  const out: unknown[] = [];
  for (let i = 0; i < c.answers; i++) out.push(comparable(await reader.next()));
  if (!reader.closed && !c.halfClose && !socket.destroyed) {
    socket.write(PROBE);
    out.push(['probe', comparable(await reader.next())]);
  } else out.push(['probe', 'closed']);
  socket.destroy();
  return out;
}

const body2 = '{"text":"hi","sampling_params":{"max_new_tokens":2}}';
const nul = Buffer.concat([
  Buffer.from(`POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}X-A: a`),
  Buffer.from([0]),
  Buffer.from(`b\r\nContent-Length: 2\r\n\r\n{}`),
]);
const obsText = (at: 'value' | 'target') =>
  Buffer.concat([
    Buffer.from(
      at === 'target'
        ? 'POST /rollout/generate?q='
        : `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: `,
    ),
    Buffer.from([0xe9]),
    Buffer.from(
      at === 'target'
        ? ` HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Content-Length: ${body2.length}\r\n\r\n${body2}`
        : `\r\n${auth}Content-Length: ${body2.length}\r\n\r\n${body2}`,
    ),
  ]);

/** node's 400 to a request its parser refuses (client-error.ts). */
function parserRefusal(code: string) {
  const message = `the request is not valid HTTP/1.1 (${code}); fix the client's request framing`;
  return { status: 400, body: { detail: message, error: { code: 'invalid_http', message } } };
}
const ok = (tokens: number, close = false) => ({ status: 200, tokens, close });
/** Kept: node's parser reads pipelined bytes as they come and answers its first parse error at once (400, then it
 * closes), so the valid request before it never gets its answer; the fast front answers requests in order, so the
 * valid one is answered first, then node's parser (the connection handed over at that boundary) refuses the rest
 * with the same 400 and closes. Both frame the bytes alike: nothing after the refusal is read as a request. */
const answeredBeforeParseError = (code: string, tokens = 2) => ({
  why: 'node answers its parse error before the valid request in front of it',
  fast: [ok(tokens), parserRefusal(code), ['probe', 'closed']],
  node: [parserRefusal(code), 'closed', ['probe', 'closed']],
});
/** Kept: after a request with `Connection: close`, node's parser refuses any further byte (HPE_CLOSED_CONNECTION)
 * and that 400 replaces the answer to the request; the fast front answers the request and closes, ignoring what
 * follows (RFC 9112 9.6: a server does not process requests after a close). */
const AFTER_CLOSE = {
  why: 'node answers 400 instead of the request when bytes follow Connection: close',
  fast: [ok(1, true), ['probe', 'closed']],
  node: [parserRefusal('HPE_CLOSED_CONNECTION'), ['probe', 'closed']],
};

// biome-ignore format: one line per case keeps the table readable
const cases: Case[] = [
  // Framing: Transfer-Encoding in its spellings, with and without Content-Length (node's parser decides all of them).
  { name: 'CL and TE chunked', bytes: edited((h) => h.replace('Content-Length: ', 'Transfer-Encoding: chunked\r\nContent-Length: '), '0\r\n\r\n'), answers: 1 },
  { name: 'TE with a space before the colon', bytes: edited((h) => h.replace('Content-Length: ', 'Transfer-Encoding : chunked\r\nContent-Length: ')), answers: 1 },
  { name: 'TE chunked, identity', bytes: edited((h) => h.replace('Content-Length: ', 'Transfer-Encoding: chunked, identity\r\nContent-Length: ')), answers: 1 },
  { name: 'TE with a tab', bytes: edited((h) => h.replace('Content-Length: ', 'Transfer-Encoding:\tchunked\r\nContent-Length: ')), answers: 1 },
  { name: 'TE upper case', bytes: edited((h) => h.replace('Content-Length: ', 'TRANSFER-ENCODING: CHUNKED\r\nContent-Length: ')), answers: 1 },
  { name: 'TE identity alone', bytes: edited((h) => h.replace('Content-Length: ', 'Transfer-Encoding: identity\r\nX-Old: ')), answers: 1 },
  { name: 'TE chunked, no CL, chunked body', bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}Transfer-Encoding: chunked\r\n\r\n${body2.length.toString(16)}\r\n${body2}\r\n0\r\n\r\n`, answers: 1 },
  // Content-Length in its spellings.
  { name: 'two equal CLs', bytes: edited((h) => h.replace(/Content-Length: (\d+)/, 'Content-Length: $1\r\nContent-Length: $1')), answers: 1 },
  { name: 'two different CLs', bytes: edited((h) => h.replace(/Content-Length: (\d+)/, 'Content-Length: $1\r\nContent-Length: 3')), answers: 1 },
  { name: 'CL 2,2 list', bytes: edited((h) => h.replace(/Content-Length: (\d+)/, 'Content-Length: $1, $1')), answers: 1 },
  { name: 'CL +N', bytes: edited((h) => h.replace('Content-Length: ', 'Content-Length: +')), answers: 1 },
  { name: 'CL -1', bytes: edited((h) => h.replace(/Content-Length: \d+/, 'Content-Length: -1')), answers: 1 },
  { name: 'CL with leading zeros', bytes: edited((h) => h.replace('Content-Length: ', 'Content-Length: 000')), answers: 1 },
  { name: 'CL huge', bytes: edited((h) => h.replace(/Content-Length: \d+/, 'Content-Length: 99999999999999999999999')), answers: 1 },
  { name: 'CL 16 digits within the limit', bytes: edited((h) => h.replace('Content-Length: ', 'Content-Length: 0000000000000')), answers: 1 },
  { name: 'CL with spaces and tabs around', bytes: edited((h) => h.replace(/Content-Length: (\d+)/, 'Content-Length: \t $1 \t')), answers: 1 },
  { name: 'CL empty', bytes: edited((h) => h.replace(/Content-Length: \d+/, 'Content-Length: ')), answers: 1 },
  // Line ends and bytes.
  { name: 'bare LF line ends', bytes: edited((h) => h.replaceAll('\r\n', '\n')), answers: 1 },
  { name: 'one bare LF line end', bytes: edited((h) => h.replace('Host: 127.0.0.1\r\n', 'Host: 127.0.0.1\n')), answers: 1 },
  { name: 'bare CR in a value', bytes: edited((h) => h.replace('Host: 127.0.0.1\r\n', 'Host: 127.0.0.1\r\nX-A: a\rb\r\n')), answers: 1 },
  { name: 'bare CR line end', bytes: edited((h) => h.replace('Host: 127.0.0.1\r\n', 'Host: 127.0.0.1\r')), answers: 1 },
  { name: 'NUL in a value', bytes: nul, answers: 1 },
  { name: 'obs-text in a value', bytes: obsText('value'), answers: 1 },
  { name: 'obs-text in the target', bytes: obsText('target'), answers: 1 },
  { name: 'space before the colon', bytes: edited((h) => h.replace('Content-Type:', 'Content-Type :')), answers: 1 },
  { name: 'CL with a space before the colon', bytes: edited((h) => h.replace('Content-Length:', 'Content-Length :')), answers: 1 },
  { name: 'obs-fold as the first header', bytes: edited((h) => h.replace('Host:', ' X-A: b\r\nHost:')), answers: 1 },
  { name: 'empty header name', bytes: edited((h) => h.replace('Host:', ': b\r\nHost:')), answers: 1 },
  // Request lines.
  { name: 'absolute-form target', bytes: edited((h) => h.replace('POST /', 'POST http://127.0.0.1/')), answers: 1 },
  { name: 'asterisk-form target', bytes: edited((h) => h.replace('POST /rollout/generate', 'OPTIONS *')), answers: 1 },
  { name: 'HTTP/1.0', bytes: edited((h) => h.replace('HTTP/1.1', 'HTTP/1.0')), answers: 1 },
  { name: 'HTTP/1.0 keep-alive', bytes: edited((h) => h.replace('HTTP/1.1', 'HTTP/1.0').replace('Host:', 'Connection: keep-alive\r\nHost:')), answers: 1 },
  { name: 'HTTP/2 preface', bytes: 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', answers: 1 },
  { name: 'two spaces after the method', bytes: edited((h) => h.replace('POST /', 'POST  /')), answers: 1 },
  { name: 'a space in the target', bytes: edited((h) => h.replace('/generate', '/gen erate')), answers: 1 },
  { name: 'GET with a body on a serving path', bytes: edited((h) => h.replace('POST', 'GET')), answers: 1 },
  // Connection handling.
  { name: 'Connection: close, then more bytes', bytes: post('/rollout/generate', gen(1), 'Connection: close\r\n') + PROBE, answers: 1, differs: AFTER_CLOSE },
  { name: 'Connection: keep-alive', bytes: post('/rollout/generate', gen(1), 'Connection: keep-alive\r\n'), answers: 1 },
  { name: 'Connection: Keep-Alive, Upgrade', bytes: post('/rollout/generate', gen(1), 'Connection: keep-alive, Upgrade\r\n'), answers: 1 },
  { name: 'Upgrade: h2c', bytes: post('/rollout/generate', gen(1), 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n'), answers: 1 },
  { name: 'Expect: 100-continue', bytes: post('/rollout/generate', gen(1), 'Expect: 100-continue\r\n'), answers: 1 },
  { name: 'head over 16 KiB', bytes: post('/rollout/generate', gen(1), `X-Big: ${'a'.repeat(16 * 1024)}\r\n`), answers: 1 },
  { name: 'head just under 16 KiB', bytes: post('/rollout/generate', gen(1), `X-Big: ${'a'.repeat(15 * 1024)}\r\n`), answers: 1 },
  { name: '100 headers', bytes: post('/rollout/generate', gen(1), Array.from({ length: 100 }, (_, i) => `X-H${i}: ${i}\r\n`).join('')), answers: 1 },
  { name: 'Host twice', bytes: post('/rollout/generate', gen(1), 'Host: evil.example\r\n'), answers: 1 },
  // Bodies and pipelining.
  { name: 'body longer than CL: the surplus is the next request', bytes: edited((h) => h.replace(/Content-Length: \d+/, 'Content-Length: 2'), `{}${post('/rollout/generate', gen(2))}`), answers: 2 },
  { name: 'body longer than CL: garbage surplus', bytes: `${post('/rollout/generate', gen(1))}garbage\r\n\r\n`, answers: 2, differs: answeredBeforeParseError('HPE_INVALID_METHOD', 1) },
  { name: 'body shorter than CL, then the client ends', bytes: post('/rollout/generate', gen(1)).slice(0, -5), answers: 1, halfClose: true },
  { name: 'half a head, then the client ends', bytes: post('/rollout/generate', gen(1)).slice(0, 40), answers: 1, halfClose: true },
  { name: 'a whole request, then the client ends', bytes: post('/rollout/generate', gen(1)), answers: 1, halfClose: true },
  { name: 'pipelined: fast, then malformed', bytes: `${post('/rollout/generate', gen(2))}POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}`, answers: 2, differs: answeredBeforeParseError('HPE_UNEXPECTED_CONTENT_LENGTH') },
  { name: 'pipelined: fast, then a node route', bytes: `${post('/rollout/generate', gen(2))}GET /rollout/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n`, answers: 2 },
  { name: 'pipelined: fast, then smuggling-shaped CL+TE', bytes: `${post('/rollout/generate', gen(2))}${edited((h) => h.replace('Content-Length: ', 'Transfer-Encoding: chunked\r\nContent-Length: '), '0\r\n\r\n')}`, answers: 2, differs: answeredBeforeParseError('HPE_INVALID_CONTENT_LENGTH') },
  { name: 'pipelined: node route, then fast', bytes: `GET /rollout/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n${post('/rollout/generate', gen(2))}`, answers: 2 },
  { name: 'pipelined: refused (no token), then fast', bytes: post('/rollout/generate', gen(2)).replace(auth, '') + post('/rollout/generate', gen(1)), answers: 2 },
  { name: 'pipelined: over the body limit, then fast', bytes: post('/rollout/generate', JSON.stringify({ text: 'x'.repeat(LIMIT) })) + post('/rollout/generate', gen(1)), answers: 2 },
  { name: 'pipelined: five fast in one write', bytes: [1, 2, 3, 4, 5].map((n) => post('/rollout/generate', gen(n))).join(''), answers: 5 },
];

describe('fast front vs node:http, adversarial bytes', { timeout: 60_000 }, () => {
  it.each(cases)('$name', async (c) => {
    const fast = await exchange(servers.fast.port, c);
    const node = await exchange(servers.node.port, c);
    if (c.differs === undefined) expect(fast).toEqual(node);
    else expect({ fast, node }).toEqual({ fast: c.differs.fast, node: c.differs.node });
  });
});
