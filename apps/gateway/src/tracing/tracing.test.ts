import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@uis/sglang-engine/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';
import { createTracing, remoteParent } from './tracing.ts';

interface CollectedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, unknown>;
  status: { code?: number } | undefined;
}

/** An in-process OTLP/HTTP collector on 127.0.0.1: keeps every span the gateway exports (JSON encoding). */
async function startCollector() {
  const spans: CollectedSpan[] = [];
  const read = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString('utf8');
      });
      req.on('end', () => resolve(body));
    });
  const server = createServer((req, res) => {
    void read(req).then((body) => {
      const json = JSON.parse(body) as {
        resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<Record<string, unknown>> }> }>;
      };
      for (const rs of json.resourceSpans)
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            spans.push({
              name: s.name as string,
              traceId: s.traceId as string,
              spanId: s.spanId as string,
              parentSpanId: (s.parentSpanId as string | undefined) || undefined,
              attributes: Object.fromEntries(
                ((s.attributes as Array<{ key: string; value: Record<string, unknown> }>) ?? []).map((a) => [
                  a.key,
                  Object.values(a.value)[0],
                ]),
              ),
              status: s.status as { code?: number } | undefined,
            });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    spans,
    url: `http://127.0.0.1:${port}/v1/traces`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const collector = await startCollector();
afterAll(() => collector.close());
const tracing = createTracing({ otlp_endpoint: collector.url, service_name: 'uis-test', sample_ratio: 1 });
const gw = gatewayOnSims({
  config: deferTestConfig(),
  server: { adminToken: 'tracing-admin-token', tracing },
});

async function flushedSpans(until: (spans: CollectedSpan[]) => boolean): Promise<CollectedSpan[]> {
  return waitFor(
    async () => {
      await tracing?.forceFlush();
      return until(collector.spans) && collector.spans;
    },
    15_000,
    'the spans to arrive',
  );
}

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN = 'b7ad6b7169203331';

describe('OpenTelemetry tracing', { timeout: 60_000 }, () => {
  it('exports one request as a span tree under the client trace: request -> route, upstream', async () => {
    const r = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` },
      body: JSON.stringify({ text: 'trace me', sampling_params: { max_new_tokens: 3 } }),
    });
    expect(r.status).toBe(200);
    const spans = await flushedSpans((s) => s.some((x) => x.name === 'POST /rollout/generate'));
    const root = spans.find((s) => s.name === 'POST /rollout/generate')!;
    expect(root).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: CLIENT_SPAN });
    expect(root.attributes).toMatchObject({ 'uis.role': 'rollout', 'uis.model': 'policy' });
    expect(root.attributes['uis.completion_tokens']).toEqual(expect.anything());
    const children = spans.filter((s) => s.parentSpanId === root.spanId).map((s) => s.name);
    expect(children.sort()).toEqual(['uis.route', 'uis.upstream']);
    const upstream = spans.find((s) => s.parentSpanId === root.spanId && s.name === 'uis.upstream')!;
    expect(upstream.attributes['uis.replica']).toMatch(/^policy\//);
  });

  it('exports one phase transition with its release and onload parts', async () => {
    const r = await fetch(`${gw.url}/admin/phases/advance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer tracing-admin-token' },
      body: JSON.stringify({ group: 'actor' }),
    });
    expect(r.status).toBe(200);
    const spans = await flushedSpans((s) => s.some((x) => x.name === 'uis.phase_transition'));
    const root = spans.find((s) => s.name === 'uis.phase_transition')!;
    expect(root.attributes).toMatchObject({
      'uis.group': 'actor',
      'uis.from': 'rollout',
      'uis.outcome': 'ok',
    });
    expect(root.parentSpanId).toBeUndefined();
    const parts = spans.filter((s) => s.parentSpanId === root.spanId).map((s) => s.name);
    expect(parts).toContain('uis.transition.release');
    expect(parts).toContain('uis.transition.onload');
  });

  it('reads a client traceparent, and ignores a malformed or all-zero one', () => {
    expect(remoteParent('00-00000000000000000000000000000000-b7ad6b7169203331-01')).toBe(
      remoteParent(undefined),
    );
    expect(remoteParent('garbage')).toBe(remoteParent(undefined));
  });
});
