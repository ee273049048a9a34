import { describe, expect, it } from 'vitest';
import { ChunkedScanner, ProtocolError, parseResponseHead, requestHead } from './http1.ts';

const head = (text: string) => Buffer.from(`${text.replaceAll('\n', '\r\n')}\r\n\r\n`, 'latin1');

describe('parseResponseHead', () => {
  it('waits for the blank line, then reads status, headers and framing', () => {
    expect(parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 3\r\n'))).toBeUndefined();
    const bytes = Buffer.concat([
      head('HTTP/1.1 200 OK\nContent-Length: 3\nX-A: 1\nX-A: 2\nSet-Cookie: a\nSet-Cookie: b'),
      Buffer.from('abc'),
    ]);
    const h = parseResponseHead(bytes)!;
    expect(h).toMatchObject({ status: 200, framing: 'length', contentLength: 3, keepAlive: true });
    expect(h.headers).toEqual({ 'content-length': '3', 'x-a': '1, 2', 'set-cookie': ['a', 'b'] });
    expect(bytes.subarray(h.end).toString()).toBe('abc');
  });

  it('chooses the framing as RFC 9112 6.3 says', () => {
    const framing = (text: string, method?: string) => {
      const h = parseResponseHead(head(text), method)!;
      return [h.framing, h.keepAlive];
    };
    expect(framing('HTTP/1.1 200 OK\ntransfer-encoding: chunked')).toEqual(['chunked', true]);
    expect(framing('HTTP/1.1 200 OK\ncontent-length: 0')).toEqual(['none', true]);
    expect(framing('HTTP/1.1 204 No Content')).toEqual(['none', true]);
    expect(framing('HTTP/1.1 200 OK\ncontent-length: 9', 'HEAD')).toEqual(['none', true]);
    // Neither framing: the body runs until the engine closes, so the socket is not reused.
    expect(framing('HTTP/1.1 200 OK')).toEqual(['close', false]);
    expect(framing('HTTP/1.1 200 OK\ntransfer-encoding: gzip')).toEqual(['close', false]);
    // Both at once: read as chunked, but never trust the connection again.
    expect(framing('HTTP/1.1 200 OK\ntransfer-encoding: chunked\ncontent-length: 5')).toEqual([
      'chunked',
      false,
    ]);
    expect(framing('HTTP/1.1 200 OK\ncontent-length: 2\nconnection: close')).toEqual(['length', false]);
    expect(framing('HTTP/1.0 200 OK\ncontent-length: 2')).toEqual(['length', false]);
    expect(framing('HTTP/1.0 200 OK\ncontent-length: 2\nconnection: keep-alive')).toEqual(['length', true]);
  });

  it('reads the keep-alive timeout the engine announces', () => {
    expect(
      parseResponseHead(head('HTTP/1.1 200 OK\ncontent-length: 0\nkeep-alive: timeout=5'))!.keepAliveHintS,
    ).toBe(5);
    expect(parseResponseHead(head('HTTP/1.1 200 OK\ncontent-length: 0'))!.keepAliveHintS).toBeUndefined();
    // The last value is remembered (engines repeat it); a different one is read afresh.
    const hint = (value: string) =>
      parseResponseHead(head(`HTTP/1.1 200 OK\ncontent-length: 0\nkeep-alive: ${value}`))!.keepAliveHintS;
    expect([hint('timeout=7, max=100'), hint('max=100'), hint('timeout=5'), hint('timeout=5')]).toEqual([
      7,
      undefined,
      5,
      5,
    ]);
  });

  it('refuses what is not an HTTP/1.x response head', () => {
    for (const bad of [
      'HTTP/2 200 OK',
      'HTTP/1.1 20 OK',
      'garbage',
      'HTTP/1.1 200 OK\nno colon here',
      'HTTP/1.1 200 OK\nbad name: x',
      'HTTP/1.1 200 OK\ncontent-length: -1',
      'HTTP/1.1 200 OK\ncontent-length: 1\ncontent-length: 2',
    ])
      expect(() => parseResponseHead(head(bad)), bad).toThrow(ProtocolError);
    expect(() => parseResponseHead(Buffer.alloc(20_000, 'a'))).toThrow(/too large/);
  });
});

describe('ChunkedScanner', () => {
  const wire = 'a\r\n0123456789\r\n3;ext=1\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n';

  it('finds the end of the body and hands out the data, whatever the read boundaries', () => {
    const bytes = Buffer.from(`${wire}NEXT`, 'latin1');
    for (let cut1 = 0; cut1 <= bytes.length; cut1++) {
      for (let cut2 = cut1; cut2 <= bytes.length; cut2 += 3) {
        const scanner = new ChunkedScanner();
        const data: string[] = [];
        let endAt = -1;
        let offset = 0;
        for (const part of [bytes.subarray(0, cut1), bytes.subarray(cut1, cut2), bytes.subarray(cut2)]) {
          if (endAt !== -1) break;
          const end = scanner.scan(part, 0, (s) => data.push(s.toString('latin1')));
          if (end !== -1) endAt = offset + end;
          offset += part.length;
        }
        expect(endAt, `cuts ${cut1}/${cut2}`).toBe(wire.length);
        expect(data.join('')).toBe('0123456789abc');
        expect(scanner.done).toBe(true);
      }
    }
  });

  it('relays an event stream cut at every byte exactly as the engine sent it', () => {
    // SSE events as uvicorn frames them (one chunk each, sizes of one to three hex digits, both cases), then the
    // last chunk; what follows the body is not part of it.
    const events = ['data: {"a":1}\n\n', `data: ${'x'.repeat(300)}\n\n`, `data: ${'y'.repeat(28)}\n\n`];
    const sizes = [events[0]!.length.toString(16), events[1]!.length.toString(16).toUpperCase(), '0024'];
    const body = `${events.map((e, i) => `${sizes[i]}\r\n${e}\r\n`).join('')}0\r\n\r\n`;
    const bytes = Buffer.from(`${body}HTTP/1.1 200 OK\r\n`, 'latin1');
    for (let cut1 = 1; cut1 < body.length; cut1++) {
      for (const cut2 of [cut1 + 1, cut1 + 2, cut1 + 7, body.length]) {
        const relayed = new ChunkedScanner();
        const decoded = new ChunkedScanner();
        const out: Buffer[] = [];
        const data: string[] = [];
        let ended = false;
        for (const part of [bytes.subarray(0, cut1), bytes.subarray(cut1, cut2), bytes.subarray(cut2)]) {
          if (ended) break;
          const end = relayed.scan(part);
          expect(
            decoded.scan(part, 0, (s) => data.push(s.toString('latin1'))),
            `cuts ${cut1}/${cut2}`,
          ).toBe(end);
          out.push(end === -1 ? part : part.subarray(0, end));
          ended = end !== -1;
        }
        expect(Buffer.concat(out).toString('latin1'), `cuts ${cut1}/${cut2}`).toBe(body);
        expect(data.join('')).toBe(events.join(''));
      }
    }
  });

  it('without a data callback only follows the framing (the relay forwards the reads as they are)', () => {
    const scanner = new ChunkedScanner();
    expect(scanner.scan(Buffer.from(wire.slice(0, 20)))).toBe(-1);
    expect(scanner.scan(Buffer.from(wire.slice(20)))).toBe(wire.length - 20);
  });

  it('accepts bare LF line endings and an empty last chunk without trailers', () => {
    const scanner = new ChunkedScanner();
    const data: string[] = [];
    expect(scanner.scan(Buffer.from('2\nhi\n0\n\n'), 0, (s) => data.push(s.toString()))).toBe(8);
    expect(data).toEqual(['hi']);
  });

  it('refuses broken framing', () => {
    for (const bad of [
      'zz\r\n',
      '\r\n',
      '2\rXab',
      '2\r\nabX\r\n',
      '2\r\nab\r\r',
      '2\r\nabc\r\n',
      '2\r\nab\rX',
      '12345678901234\r\n',
      '0\r\n\rX',
    ])
      expect(() => new ChunkedScanner().scan(Buffer.from(bad)), JSON.stringify(bad)).toThrow(ProtocolError);
  });
});

describe('requestHead', () => {
  it('writes the request line, host, headers and content-length', () => {
    expect(requestHead('POST', '/generate', '127.0.0.1:3000', ['content-type', 'application/json'], 12)).toBe(
      'POST /generate HTTP/1.1\r\nhost: 127.0.0.1:3000\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n',
    );
  });

  it('refuses text that would split the request', () => {
    expect(() => requestHead('POST', '/a b', 'h', [], 0)).toThrow(TypeError);
    expect(() => requestHead('POST', '/a', 'h', ['x', 'a\r\nb: c'], 0)).toThrow(TypeError);
    expect(() => requestHead('POST', '/a', 'h', ['x\n', 'v'], 0)).toThrow(TypeError);
  });
});
