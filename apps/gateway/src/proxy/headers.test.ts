import { describe, expect, it } from 'vitest';
import { upstreamRequestHeaders } from './headers.ts';

const CLIENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const OURS = '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01';

describe('upstreamRequestHeaders and trace context', () => {
  const raw = ['Traceparent', CLIENT, 'tracestate', 'vendor=1', 'x-user', 'u'];

  it('passes the client traceparent through untouched when the gateway does not trace', () => {
    expect(upstreamRequestHeaders(raw, 'req-1')).toEqual([
      'Traceparent',
      CLIENT,
      'tracestate',
      'vendor=1',
      'x-user',
      'u',
      'content-type',
      'application/json',
      'x-request-id',
      'req-1',
    ]);
  });

  it("replaces it with the gateway's span when traced (the engine's spans become the request's children)", () => {
    const out = upstreamRequestHeaders(raw, 'req-1', undefined, OURS);
    const pairs = Object.fromEntries(
      Array.from({ length: out.length / 2 }, (_, i) => [out[2 * i], out[2 * i + 1]]),
    );
    expect(pairs).toMatchObject({ traceparent: OURS, tracestate: 'vendor=1' });
    expect(out).not.toContain(CLIENT);
    expect(out).not.toContain('Traceparent');
  });
});
