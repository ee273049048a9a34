import { describe, expect, it } from 'vitest';
import { sseData } from './sse.ts';

function streamOf(parts: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const p of parts) controller.enqueue(encoder.encode(p));
      controller.close();
    },
  });
}

async function all(parts: string[]): Promise<string[]> {
  const out: string[] = [];
  for await (const d of sseData(streamOf(parts))) out.push(d);
  return out;
}

describe('sseData', () => {
  it('splits events across arbitrary chunk boundaries, CRLF, comments and multi-line data', async () => {
    expect(
      await all(['data: {"a":', '1}\n\n', ': keep-alive\n\ndata: x\r\ndata: y\r\n\r\n', 'data: [DONE]\n\n']),
    ).toEqual(['{"a":1}', 'x\ny', '[DONE]']);
  });

  it('yields a trailing event without a blank line and handles multi-byte characters split across chunks', async () => {
    const bytes = new TextEncoder().encode('data: héllo\n\ndata:tail');
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes.slice(0, 8));
        c.enqueue(bytes.slice(8));
        c.close();
      },
    });
    const out: string[] = [];
    for await (const d of sseData(stream)) out.push(d);
    expect(out).toEqual(['héllo', 'tail']);
  });

  it('cancels the body when the consumer stops early', async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new TextEncoder().encode('data: x\n\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const _ of sseData(stream)) break;
    expect(cancelled).toBe(true);
  });

  it('reads any async iterable of chunks: a CRLF split across chunks is one line end, not an event end', async () => {
    async function* chunks() {
      yield 'data: x\r';
      yield new TextEncoder().encode('\ndata: y\r\n\r\ndata: z');
    }
    const out: string[] = [];
    for await (const d of sseData(chunks())) out.push(d);
    expect(out).toEqual(['x\ny', 'z']);
  });
});
