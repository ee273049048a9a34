import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastHandler } from '../proxy/index.ts';
import { FastHeadParser, type HeadParse, MAX_HEADER_LINES, NODE_MAX_HEADER_BYTES } from './fast-head.ts';

// The fast front's head parser alone: what it accepts it must read exactly as node's parser does (a real node:http
// server is the reference), a head cut anywhere is `more` until its last byte, and every limit sits where node's is.

const generate: FastHandler = () => {};
const chat: FastHandler = () => {};
const MAX_BODY = 4096;
/** Routes as a server registers them: an exact method and path. */
function rules(table: Record<string, FastHandler>, maxBodyBytes = MAX_BODY) {
  return { route: (method: string, path: string) => table[`${method} ${path}`], maxBodyBytes };
}
const routed = () =>
  new FastHeadParser(
    rules({ 'POST /rollout/generate': generate, 'POST /rollout/v1/chat/completions': chat }),
  );

function head(lines: string[], target = '/rollout/generate', method = 'POST'): string {
  return `${method} ${target} HTTP/1.1\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`;
}
const usual = ['Host: 127.0.0.1:8080', 'Content-Type: application/json', 'Content-Length: 2'];

/** What node:http reads from the same bytes (method, url, headers, rawHeaders). */
let reference: (bytes: string) => Promise<{
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
}>;
let stopReference: () => Promise<void>;
beforeAll(async () => {
  const server = createServer((req, res) => {
    res.end(
      JSON.stringify({ method: req.method, url: req.url, headers: req.headers, rawHeaders: req.rawHeaders }),
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  reference = (bytes) =>
    new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(`${bytes}{}`));
      let got = '';
      socket.on('data', (b: Buffer) => {
        got += b.toString('latin1');
        const at = got.indexOf('\r\n\r\n');
        const length = /content-length: (\d+)/i.exec(got)?.[1];
        if (at !== -1 && length !== undefined && got.length >= at + 4 + Number(length)) {
          socket.destroy();
          resolve(JSON.parse(got.slice(at + 4)));
        }
      });
      socket.on('error', reject);
    });
  stopReference = () => new Promise((r) => server.close(() => r()));
});
afterAll(() => stopReference());

// biome-ignore format: one line per case keeps the table readable
const accepted: Array<{ name: string; bytes: string }> = [
  { name: 'usual', bytes: head(usual) },
  { name: 'a client library head', bytes: head(['Host: gw:8080', 'User-Agent: python-httpx/0.27', 'Accept: */*', 'Accept-Encoding: gzip, deflate', 'Connection: keep-alive', 'Content-Type: application/json', 'Authorization: Bearer t0k', 'X-Request-Id: r-1', 'Content-Length: 2']) },
  { name: 'other case and order', bytes: head(['content-length: 2', 'HOST: a', 'CoNtEnT-TyPe: application/json']) },
  { name: 'spaces and tabs around values', bytes: head(['Host:  a ', 'X-Tabbed:\t b\tc \t', 'Content-Length: 2  ', 'X-Empty:', 'X-Blank:   ']) },
  { name: 'Connection: close', bytes: head([...usual, 'Connection: Close']) },
  { name: 'query string', bytes: head(usual, '/rollout/generate?x=1&y=?') },
  { name: 'the other route', bytes: head(usual, '/rollout/v1/chat/completions') },
  { name: 'obs-text-free punctuation in values', bytes: head([...usual, 'X-Punct: !"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~']) },
];

// biome-ignore format: one line per case keeps the table readable
const refused: Array<{ name: string; bytes: string }> = [
  { name: 'no Host', bytes: head(['Content-Length: 2']) },
  { name: 'no Content-Length', bytes: head(['Host: a']) },
  { name: 'two Content-Lengths', bytes: head([...usual, 'Content-Length: 2']) },
  { name: 'two Hosts in other cases', bytes: head([...usual, 'HOST: b']) },
  { name: 'a tab after the Content-Length', bytes: head(['Host: a', 'Content-Length: 2\t']) },
  { name: 'a tab between spaces after the Content-Length', bytes: head(['Host: a', 'Content-Length: 2 \t ']) },
  { name: 'signed Content-Length', bytes: head(['Host: a', 'Content-Length: +2']) },
  { name: 'empty Content-Length', bytes: head(['Host: a', 'Content-Length:']) },
  { name: 'Content-Length over the body limit', bytes: head(['Host: a', `Content-Length: ${MAX_BODY + 1}`]) },
  { name: 'Content-Length of 16 digits', bytes: head(['Host: a', 'Content-Length: 0000000000000002']) },
  { name: 'Transfer-Encoding', bytes: head([...usual, 'Transfer-Encoding: chunked']) },
  { name: 'Expect', bytes: head([...usual, 'Expect: 100-continue']) },
  { name: 'TE', bytes: head([...usual, 'TE: trailers']) },
  { name: 'Connection: upgrade', bytes: head([...usual, 'Connection: upgrade']) },
  { name: 'Connection with two tokens', bytes: head([...usual, 'Connection: keep-alive, x-a']) },
  { name: 'space before the colon', bytes: head(['Host : a', 'Content-Length: 2']) },
  { name: 'empty name', bytes: head([...usual, ': a']) },
  { name: 'obs-fold', bytes: head([...usual, 'X-A: a', ' b']) },
  { name: 'bare LF', bytes: head(usual).replace('\r\nContent-Type', '\nContent-Type') },
  { name: 'bare CR in a value', bytes: head([...usual, 'X-A: a\rb']) },
  { name: 'CR alone where the blank line goes', bytes: `${head(usual).slice(0, -2)}\rX` },
  { name: 'NUL in a value', bytes: head([...usual, 'X-A: a\x00b']) },
  { name: 'DEL in a value', bytes: head([...usual, 'X-A: a\x7fb']) },
  { name: 'byte above ASCII in a value', bytes: head([...usual, 'X-A: \xe9']) },
  { name: 'HTTP/1.0', bytes: head(usual).replace('HTTP/1.1', 'HTTP/1.0') },
  { name: 'lower-case method', bytes: head(usual, '/rollout/generate', 'post') },
  { name: 'not a route', bytes: head(usual, '/rollout/nope') },
  { name: 'a route under another method', bytes: head(usual, '/rollout/generate', 'PUT') },
  { name: 'absolute-form target', bytes: head(usual, 'http://a/rollout/generate') },
  { name: 'asterisk target', bytes: head(usual, '*') },
  { name: 'two spaces after the method', bytes: head(usual, ' /rollout/generate') },
  { name: 'a tab in the target', bytes: head(usual, '/rollout/generate\t') },
  { name: 'trailing space after the version', bytes: head(usual).replace('HTTP/1.1\r\n', 'HTTP/1.1 \r\n') },
  { name: 'no request line', bytes: `\r\n${head(usual)}` },
];

/** Every proper prefix of `bytes`, parsed from a fresh buffer. */
function prefixes(parser: FastHeadParser, bytes: string): HeadParse[] {
  const all = Buffer.from(bytes, 'latin1');
  const out: HeadParse[] = [];
  for (let n = 0; n < all.length; n++) out.push(parser.parse(Buffer.from(all.subarray(0, n))));
  return out;
}

describe('FastHeadParser', () => {
  it.each(accepted)('$name: read as node reads it, its route found', async ({ bytes }) => {
    const parser = routed();
    const got = parser.parse(Buffer.from(`${bytes}{}`, 'latin1'));
    expect(typeof got).toBe('object');
    if (typeof got === 'string') return;
    const node = await reference(bytes);
    expect({ method: got.method, url: got.url, headers: got.headers, rawHeaders: got.rawHeaders }).toEqual(
      node,
    );
    expect(got.route).toBe(node.url.startsWith('/rollout/generate') ? generate : chat);
    expect(got.headBytes).toBe(Buffer.byteLength(bytes, 'latin1'));
    expect(got.contentLength).toBe(2);
    expect(got.close).toBe(/connection: close/i.test(bytes));
  });

  it.each(accepted)('$name: cut at every byte, `more` until the head is whole', ({ bytes }) => {
    const parser = routed();
    expect(prefixes(parser, bytes).every((p) => p === 'more')).toBe(true);
    // Parsed again from the line cache, the same head.
    const first = parser.parse(Buffer.from(bytes, 'latin1'));
    const again = parser.parse(Buffer.from(bytes, 'latin1'));
    expect(typeof first === 'object' && { ...first }).toEqual(typeof again === 'object' && { ...again });
  });

  it.each(refused)('$name: node parses it (cut anywhere: `more` or `node`, never a head)', ({ bytes }) => {
    const parser = routed();
    expect(parser.parse(Buffer.from(`${bytes}{}`, 'latin1'))).toBe('node');
    expect(prefixes(parser, bytes).every((p) => p === 'more' || p === 'node')).toBe(true);
  });

  it("takes a head of node's header limit and no byte more", () => {
    const parser = routed();
    const fill = (total: number) => {
      const base = head([...usual, 'X-Fill: ']).length;
      return head([...usual, `X-Fill: ${'a'.repeat(total - base)}`]);
    };
    expect(fill(NODE_MAX_HEADER_BYTES).length).toBe(NODE_MAX_HEADER_BYTES);
    expect(typeof parser.parse(Buffer.from(fill(NODE_MAX_HEADER_BYTES)))).toBe('object');
    expect(parser.parse(Buffer.from(fill(NODE_MAX_HEADER_BYTES + 1)))).toBe('node');
    // An unfinished head past the limit is not waited for.
    expect(
      parser.parse(Buffer.from(fill(NODE_MAX_HEADER_BYTES + 10).slice(0, NODE_MAX_HEADER_BYTES + 1))),
    ).toBe('node');
    expect(parser.parse(Buffer.from(fill(NODE_MAX_HEADER_BYTES).slice(0, NODE_MAX_HEADER_BYTES - 1)))).toBe(
      'more',
    );
  });

  it('takes as many header lines as its limit and no more', () => {
    const parser = routed();
    const lines = (n: number) => [
      ...usual,
      ...Array.from({ length: n - usual.length }, (_, i) => `X-L${i}: ${i}`),
    ];
    expect(typeof parser.parse(Buffer.from(head(lines(MAX_HEADER_LINES))))).toBe('object');
    expect(parser.parse(Buffer.from(head(lines(MAX_HEADER_LINES + 1))))).toBe('node');
  });

  it('takes a Content-Length up to the body limit, of at most 15 digits', () => {
    const at = (max: number, cl: string) =>
      new FastHeadParser(rules({ 'POST /rollout/generate': generate }, max)).parse(
        Buffer.from(head(['Host: a', `Content-Length: ${cl}`])),
      );
    const limit = at(MAX_BODY, String(MAX_BODY));
    expect(typeof limit === 'object' && limit.contentLength).toBe(MAX_BODY);
    expect(at(MAX_BODY, String(MAX_BODY + 1))).toBe('node');
    const fifteen = at(Number.MAX_SAFE_INTEGER, '999999999999999');
    expect(typeof fifteen === 'object' && fifteen.contentLength).toBe(999_999_999_999_999);
    expect(at(Number.MAX_SAFE_INTEGER, '1000000000000000')).toBe('node');
  });

  it('takes a method of up to 16 capital letters', () => {
    const any = new FastHeadParser({ route: () => generate, maxBodyBytes: MAX_BODY });
    expect(typeof any.parse(Buffer.from(head(usual, '/x', 'A'.repeat(16))))).toBe('object');
    expect(any.parse(Buffer.from(head(usual, '/x', 'A'.repeat(17))))).toBe('node');
  });

  it('finds a repeated name past the bound of its name caches', () => {
    const parser = routed();
    // Fill the caches of spellings and lower-case names with names no later request sends.
    for (let i = 0; i < 300; i++) parser.parse(Buffer.from(head([...usual, `X-Filler-${i}: a`])));
    const fresh = (names: string[]) => parser.parse(Buffer.from(head([...usual, ...names])));
    expect(fresh(['X-Late: 1', 'x-late: 2'])).toBe('node');
    expect(fresh(['X-Late-2: 1', 'X-Late-2: 1'])).toBe('node');
    expect(parser.parse(Buffer.from(head(['Host: a', 'CONTENT-length: 2', 'content-LENGTH: 3'])))).toBe(
      'node',
    );
    const single = fresh(['X-Late-3: 1']);
    expect(typeof single === 'object' && single.headers['x-late-3']).toBe('1');
  });

  it('reads each value from its own bytes when the last request sent another one under the same name', () => {
    const parser = routed();
    const long = 'v'.repeat(100);
    const sent = [
      ['Host: a', 'X-Id: 1', `X-Long: ${long}`, 'Authorization: Bearer t1'],
      ['Host: b', 'X-Id: 1', `X-Long: ${long}w`, 'Authorization: Bearer t2'],
      ['Host: b', 'X-Id: 22', `X-Long: ${long}`, 'Authorization: Bearer t2'],
      ['Host: a', 'X-Id: 2', 'X-Long:', 'Authorization: Bearer t1'],
    ];
    for (const lines of [...sent, ...sent]) {
      const got = parser.parse(Buffer.from(head(['Content-Length: 2', ...lines])));
      if (typeof got === 'string') throw new Error(got);
      expect(got.rawHeaders.slice(2)).toEqual(
        lines.flatMap((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
      );
    }
  });

  it("keeps each server's routes (the request-line cache is per parser)", () => {
    const other: FastHandler = () => {};
    const a = routed();
    const b = new FastHeadParser(rules({ 'POST /rollout/generate': other }));
    const bytes = Buffer.from(head(usual));
    for (let i = 0; i < 3; i++) {
      expect((a.parse(bytes) as { route: FastHandler }).route).toBe(generate);
      expect((b.parse(bytes) as { route: FastHandler }).route).toBe(other);
    }
    // A query string names the same route; a target past the cache's bound is routed each time, still right.
    const long = `/rollout/generate?${'q'.repeat(400)}`;
    expect((a.parse(Buffer.from(head(usual, long))) as { url: string }).url).toBe(long);
    expect((a.parse(Buffer.from(head(usual, long))) as { route: FastHandler }).route).toBe(generate);
  });
});
