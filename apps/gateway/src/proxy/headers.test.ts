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

describe('upstreamRequestHeaders and credentials', () => {
  const raw = [
    'Authorization',
    'Bearer serving-token',
    'Cookie',
    'a=1',
    'Proxy-Authorization',
    'Basic x',
    'X-Api-Key',
    'k1',
    'api-key',
    'k2',
    'x-user',
    'u',
  ];
  const names = (out: string[]) => out.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());

  it.each([
    [undefined, ['x-user']],
    [new Set(['x-api-key']), ['x-api-key', 'x-user']],
    [new Set(['api-key', 'cookie']), ['cookie', 'api-key', 'x-user']],
  ])('drops every credential header but the passed ones (%s)', (passed, kept) => {
    const out = upstreamRequestHeaders(raw, 'req-1', undefined, undefined, passed);
    expect(names(out)).toEqual([...kept, 'content-type', 'x-request-id']);
  });

  it("replaces the client's Authorization with the model's engine key", () => {
    const out = upstreamRequestHeaders(raw, 'req-1', 'engine-key', undefined, new Set(['x-api-key']));
    expect(out.slice(-2)).toEqual(['authorization', 'Bearer engine-key']);
    expect(out).not.toContain('Bearer serving-token');
  });
});
