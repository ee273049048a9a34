import { afterAll, describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';
import { childNames, startCollector } from '../testing/otlp-collector.ts';
import { remoteParent } from './tracing.ts';

const collector = await startCollector();
afterAll(() => collector.close());
const tracing = await collector.tracing();
const gw = gatewayOnSims({
  config: splitTestConfig(),
  server: { adminToken: 'tracing-admin-token', tracing },
});

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN = 'b7ad6b7169203331';
const traceparent = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;

describe('OpenTelemetry tracing of serving requests', { timeout: 60_000 }, () => {
  it('exports one request as a span tree under the client trace: request -> route, upstream', async () => {
    const r = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent },
      body: JSON.stringify({ text: 'trace me', sampling_params: { max_new_tokens: 3 } }),
    });
    expect(r.status).toBe(200);
    const spans = await collector.flushed(tracing, (s) => s.some((x) => x.name === 'POST /rollout/generate'));
    const root = spans.find((s) => s.name === 'POST /rollout/generate')!;
    expect(root).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: CLIENT_SPAN });
    expect(root.attributes).toMatchObject({ 'uis.role': 'rollout', 'uis.model': 'policy' });
    expect(root.attributes['uis.completion_tokens']).toEqual(expect.anything());
    expect(root.attributes['uis.adapter']).toBeUndefined();
    expect(childNames(spans, root)).toEqual(['uis.route', 'uis.upstream']);
    const upstream = spans.find((s) => s.parentSpanId === root.spanId && s.name === 'uis.upstream')!;
    expect(upstream.attributes['uis.replica']).toMatch(/^policy\//);
  });

  it('exports one GenRM scoring call of the messages adapter: request -> route, engine call, with its tokens', async () => {
    const r = await fetch(`${gw.url}/genrm/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent },
      body: JSON.stringify({
        messages: [{ role: 'user', content: 'Is 2 + 2 = 4? Answer with a judgement.' }],
        sampling_params: { max_new_tokens: 8 },
      }),
    });
    expect(r.status).toBe(200);
    expect(Object.keys((await r.json()) as object)).toEqual(['response']);
    const spans = await collector.flushed(tracing, (s) => s.some((x) => x.name === 'POST /genrm/generate'));
    const root = spans.find((s) => s.name === 'POST /genrm/generate')!;
    expect(root).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: CLIENT_SPAN });
    expect(root.attributes).toMatchObject({
      'uis.role': 'genrm',
      'uis.model': 'judge',
      'uis.adapter': 'genrm_messages',
      'http.response.status_code': 200,
    });
    expect(root.attributes['uis.completion_tokens']).toEqual(expect.any(Number));
    expect(childNames(spans, root)).toEqual(['uis.route', 'uis.upstream']);
    const upstream = spans.find((s) => s.parentSpanId === root.spanId && s.name === 'uis.upstream')!;
    expect(upstream.attributes).toMatchObject({ 'uis.attempt': 1 });
    expect(upstream.attributes['uis.replica']).toMatch(/^judge\//);
    expect(upstream.startMs).toBeGreaterThanOrEqual(root.startMs);
    expect(upstream.endMs).toBeLessThanOrEqual(root.endMs);
  });

  it('reads a client traceparent, and ignores a malformed or all-zero one', () => {
    expect(remoteParent('00-00000000000000000000000000000000-b7ad6b7169203331-01')).toBe(
      remoteParent(undefined),
    );
    expect(remoteParent('garbage')).toBe(remoteParent(undefined));
  });
});
