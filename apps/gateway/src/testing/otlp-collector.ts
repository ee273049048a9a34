import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@uis/sglang-engine/testing';
import { createTracing } from '../tracing/create-tracing.ts';
import type { UisTracing } from '../tracing/tracing.ts';

export interface CollectedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  status: { code?: number } | undefined;
}

type OtlpSpan = Record<string, unknown> & {
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
};

function collected(s: OtlpSpan): CollectedSpan {
  return {
    name: s.name as string,
    traceId: s.traceId as string,
    spanId: s.spanId as string,
    parentSpanId: (s.parentSpanId as string | undefined) || undefined,
    startMs: Number(BigInt(String(s.startTimeUnixNano)) / 1000n) / 1000,
    endMs: Number(BigInt(String(s.endTimeUnixNano)) / 1000n) / 1000,
    attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]])),
    status: s.status as { code?: number } | undefined,
  };
}

/** An in-process OTLP/HTTP collector on 127.0.0.1: keeps every span exported to it (JSON encoding). */
export async function startCollector() {
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
      const json = JSON.parse(body) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
      for (const rs of json.resourceSpans)
        for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push(collected(s));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}/v1/traces`;
  return {
    spans,
    url,
    /** A tracer exporting every span here (one per server: a server shuts its tracer down when it closes). */
    tracing: async (): Promise<UisTracing> =>
      (await createTracing({ otlp_endpoint: url, service_name: 'uis-test', sample_ratio: 1 })) as UisTracing,
    /** The spans once `until` holds, flushing `tracing` while waiting. */
    flushed: (tracing: UisTracing, until: (spans: CollectedSpan[]) => boolean): Promise<CollectedSpan[]> =>
      waitFor(
        async () => {
          await tracing.forceFlush();
          return until(spans) && spans;
        },
        15_000,
        'the spans to arrive',
      ),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The names of `parent`'s children, sorted. */
export function childNames(spans: readonly CollectedSpan[], parent: CollectedSpan): string[] {
  return spans
    .filter((s) => s.parentSpanId === parent.spanId)
    .map((s) => s.name)
    .sort();
}
