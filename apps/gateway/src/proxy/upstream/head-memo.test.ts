import { describe, expect, it } from 'vitest';
import { HeadMemo } from './head-memo.ts';
import { parseResponseHead } from './http1.ts';

const head = (text: string) => Buffer.from(`${text.replaceAll('\n', '\r\n')}\r\n\r\n`, 'latin1');

const DATE_1 = 'Sat, 05 Dec 2026 04:34:12 GMT';
const DATE_2 = 'Sat, 05 Dec 2026 04:34:13 GMT';
/** uvicorn's head (SGLang) and node's (sglang-sim), with the values that change between answers as $D and $L. */
const UVICORN =
  'HTTP/1.1 200 OK\ndate: $D\nserver: uvicorn\ncontent-length: $L\ncontent-type: application/json';
const NODE =
  'HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: $L\nDate: $D\nConnection: keep-alive\nKeep-Alive: timeout=5';
const STREAM =
  'HTTP/1.1 200 OK\ncontent-type: text/event-stream\ncache-control: no-cache\nDate: $D\nConnection: keep-alive\nKeep-Alive: timeout=5\nTransfer-Encoding: chunked';
const fill = (shape: string, date: string, length: string) => shape.replace('$D', date).replace('$L', length);

/** Heads an engine could send: the usual shapes with other values, and every edge the full parser decides. */
const CORPUS: Buffer[] = [
  ...[UVICORN, NODE].flatMap((shape) =>
    [
      [DATE_1, '123'],
      [DATE_2, '9'],
      [DATE_2, '0'],
      [DATE_1, '007'],
      [DATE_1, '123456789012345'],
      [DATE_1, '1234567890123456'], // 16 digits: refused
      [DATE_1, '-1'],
      [DATE_1, ' 12'],
      [DATE_1, '12 '],
      [DATE_1, '1\t2'],
      [DATE_1, ''],
      [` ${DATE_1}`, '5'],
      [`${DATE_1} `, '5'],
      [`\t${DATE_1}\t`, '5'],
      [`${DATE_1}\x7f`, '5'],
      [`${DATE_1}\xa0`, '5'],
      [`\xa0${DATE_1}`, '5'],
      [`${DATE_1}\v`, '5'],
      ['x'.repeat(64), '5'],
      ['x'.repeat(65), '5'],
      ['', '5'],
      [`${DATE_1}\nx-injected: 1`, '5'], // bare LF: one line to the parser
      [`${DATE_1}\n second`, '5'], // obs-fold
    ].map(([d, l]) => head(fill(shape, d!, l!))),
  ),
  head(fill(STREAM, DATE_1, '')),
  head(fill(STREAM, DATE_2, '')),
  head(`${fill(STREAM, DATE_1, '')}\ncontent-length: 5`), // both framings
  head(`${fill(UVICORN, DATE_1, '5')}\ntransfer-encoding: chunked`),
  head('HTTP/1.1 200 OK\ncontent-type: application/json\ndate: D\nserver: uvicorn\ncontent-length: 3'), // order
  head('HTTP/1.1 200 OK\nDATE: D\nSERVER: uvicorn\nCONTENT-LENGTH: 3\nCONTENT-TYPE: application/json'), // case
  head(`${fill(UVICORN, DATE_1, '3')}\ndate: ${DATE_2}`), // duplicates
  head(`${fill(UVICORN, DATE_1, '3')}\ncontent-length: 3`),
  head(`${fill(UVICORN, DATE_1, '3')}\ncontent-length: 4`),
  head(`${fill(UVICORN, DATE_1, '3')}\nx-a: 1\nx-a: 2`),
  head(`${fill(UVICORN, DATE_1, '3')}\nset-cookie: a=1`),
  head(`${fill(UVICORN, DATE_1, '3')}\nset-cookie: a=1\nset-cookie: b=2`),
  head(`${fill(UVICORN, DATE_1, '3')}\nx-big: ${'v'.repeat(3000)}`),
  head(`${fill(UVICORN, DATE_1, '3')}\nx-huge: ${'v'.repeat(17_000)}`), // oversize
  head(fill(UVICORN, DATE_1, '3').replace('200 OK', '204 No Content')),
  head(fill(UVICORN, DATE_1, '3').replace('200 OK', '304 Not Modified')),
  head(fill(UVICORN, DATE_1, '3').replace('200 OK', '400 Bad Request')),
  head(fill(UVICORN, DATE_1, '3').replace('HTTP/1.1', 'HTTP/1.0')),
  head(`${fill(UVICORN, DATE_1, '3').replace('HTTP/1.1', 'HTTP/1.0')}\nconnection: keep-alive`),
  head(`${fill(UVICORN, DATE_1, '3')}\nconnection: close`),
  head('HTTP/1.1 200 OK\ndate: D\nserver: uvicorn'), // no framing: read to close
  head('HTTP/1.1 100 Continue'),
  Buffer.concat([head('HTTP/1.1 100 Continue'), head(fill(UVICORN, DATE_1, '3'))]),
  head(fill(UVICORN, DATE_1, '3').replace('HTTP/1.1 200', 'HTTP/1.1 2x0')),
  head(fill(UVICORN, DATE_1, '3').replace('server:', 'bad name:')),
  head(fill(UVICORN, DATE_1, '3').replace('date:', 'date :')),
  head(fill(UVICORN, DATE_1, '3').replace('date: ', 'date:')),
  head(fill(UVICORN, DATE_1, '3').replace('content-length: ', 'content-length:  ')),
  Buffer.from(fill(UVICORN, DATE_1, '3').replaceAll('\n', '\r\n') + '\n\n', 'latin1'), // bare LF end
  Buffer.concat([head(fill(UVICORN, DATE_1, '3')), Buffer.from('abc')]), // the body after it
];

/** What a parse gives: the head, undefined, or the error it throws. */
function outcome(parse: () => unknown): unknown {
  try {
    return { head: parse() };
  } catch (e) {
    return { error: (e as Error).message, name: (e as Error).name };
  }
}

function expectSame(memo: HeadMemo, buf: Buffer, method: string, why: string): void {
  const fast = outcome(() => memo.parse(buf, method));
  const full = outcome(() => parseResponseHead(buf, method));
  expect(fast, why).toStrictEqual(full);
  // Same header order too (toStrictEqual does not look at it).
  const keys = (o: unknown) => Object.keys((o as { head?: { headers?: object } }).head?.headers ?? {});
  expect(keys(fast), why).toEqual(keys(full));
}

describe('HeadMemo', { timeout: 60_000 }, () => {
  it('gives what the full parser gives, whatever head taught it and whatever head follows', () => {
    for (const method of ['POST', 'HEAD']) {
      for (const [i, teacher] of CORPUS.entries()) {
        const memo = new HeadMemo();
        outcome(() => memo.parse(teacher, method));
        outcome(() => memo.parse(teacher, method));
        for (const [j, probe] of CORPUS.entries())
          expectSame(memo, probe, method, `${method} ${i} then ${j}`);
      }
    }
  });

  it('takes the shortcut for the usual heads: other dates and lengths of a shape seen before', () => {
    for (const shape of [UVICORN, NODE]) {
      const memo = new HeadMemo();
      memo.parse(head(fill(shape, DATE_1, '123')), 'POST');
      expect(memo.hits).toBe(0);
      for (const [d, l] of [
        [DATE_2, '9'],
        [DATE_2, '0'],
        [DATE_1, '007'],
        [DATE_1, '123456789012345'],
      ])
        expectSame(memo, head(fill(shape, d!, l!)), 'POST', `${d} ${l}`);
      expect(memo.hits).toBe(4);
      // Another method is another shape (HEAD answers carry no body).
      expectSame(memo, head(fill(shape, DATE_1, '5')), 'HEAD', 'HEAD');
      expect(memo.hits).toBe(4);
    }
    const memo = new HeadMemo();
    memo.parse(head(fill(STREAM, DATE_1, '')), 'POST');
    expectSame(memo, head(fill(STREAM, DATE_2, '')), 'POST', 'stream');
    expect(memo.hits).toBe(1);
  });

  it('waits for a head cut at any byte, as the full parser does', () => {
    const memo = new HeadMemo();
    memo.parse(head(fill(UVICORN, DATE_1, '123')), 'POST');
    for (const probe of [head(fill(UVICORN, DATE_2, '45')), head(fill(NODE, DATE_2, '45'))])
      for (let cut = 0; cut <= probe.length; cut++)
        expectSame(memo, probe.subarray(0, cut), 'POST', `cut at ${cut}`);
  });

  it('remembers a few shapes, the latest first', () => {
    const memo = new HeadMemo();
    const shapes = [UVICORN, NODE, STREAM, UVICORN.replace('200 OK', '400 Bad Request')];
    for (const shape of shapes) memo.parse(head(fill(shape, DATE_1, '1')), 'POST');
    for (const shape of shapes) expectSame(memo, head(fill(shape, DATE_2, '2')), 'POST', shape);
    expect(memo.hits).toBe(4);
    memo.parse(head(fill(UVICORN.replace('200 OK', '404 Not Found'), DATE_1, '1')), 'POST');
    expectSame(memo, head(fill(UVICORN, DATE_2, '2')), 'POST', 'the oldest is forgotten');
    expect(memo.hits).toBe(4);
  });

  it("does not share the headers it gives (a caller's edit changes no later head)", () => {
    const memo = new HeadMemo();
    const first = memo.parse(head(fill(UVICORN, DATE_1, '1')), 'POST')!;
    first.headers.server = 'edited';
    const second = memo.parse(head(fill(UVICORN, DATE_1, '2')), 'POST')!;
    second.headers['content-type'] = 'edited';
    expect(memo.parse(head(fill(UVICORN, DATE_1, '3')), 'POST')!.headers).toStrictEqual({
      date: DATE_1,
      server: 'uvicorn',
      'content-length': '3',
      'content-type': 'application/json',
    });
  });
});
