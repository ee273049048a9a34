import { performance } from 'node:perf_hooks';
import {
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanExporter, TracerProvider } from '@opentelemetry/sdk-trace';
import type { TracingConfig } from '@uis/spec';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** Epoch milliseconds with sub-millisecond precision (span times). */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/** The context a client's W3C `traceparent` names, so the gateway's spans join the client's trace. */
export function remoteParent(header: string | string[] | undefined): Context {
  const m = typeof header === 'string' ? TRACEPARENT.exec(header.trim().toLowerCase()) : null;
  if (m === null || /^0+$/.test(m[1] as string) || /^0+$/.test(m[2] as string)) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: m[1] as string,
    spanId: m[2] as string,
    traceFlags: Number.parseInt(m[3] as string, 16),
    isRemote: true,
  });
}

/** The W3C `traceparent` naming `span` as the parent of what the receiver does (an engine's own spans). */
export function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-${c.traceFlags.toString(16).padStart(2, '0')}`;
}

/** One serving request's spans: the request, its routing decision, one span per engine attempt (retries named so). */
export class RequestTrace {
  readonly traceparent: string;
  readonly #tracer: Tracer;
  readonly #root: Span;
  readonly #ctx: Context;
  #route: Span | undefined;
  #upstream: Span | undefined;
  #attempts = 0;

  constructor(tracer: Tracer, name: string, parent: Context, attributes: Record<string, string>) {
    this.#tracer = tracer;
    this.#root = tracer.startSpan(name, { kind: SpanKind.SERVER, startTime: epochMs(), attributes }, parent);
    this.#ctx = trace.setSpan(parent, this.#root);
    this.#route = tracer.startSpan('uis.route', { startTime: epochMs() }, this.#ctx);
    this.traceparent = traceparentOf(this.#root);
  }

  /** Names the adapter that answers the request itself (the GenRM messages call) instead of relaying it. */
  adapter(name: string): void {
    this.#root.setAttribute('uis.adapter', name);
  }

  /** The routing decision picked `engineId` (or refused): ends the route span, starts the attempt's span. A
   * previous attempt that failed ends as an error with `retryReason`. */
  attempt(engineId: string | undefined, retryReason?: string): void {
    const now = epochMs();
    if (this.#route !== undefined) {
      if (engineId !== undefined) this.#route.setAttribute('uis.replica', engineId);
      this.#route.end(now);
      this.#route = undefined;
    }
    if (this.#upstream !== undefined) {
      this.#upstream.setStatus({ code: SpanStatusCode.ERROR, message: retryReason ?? 'retried' });
      this.#upstream.end(now);
      this.#upstream = undefined;
    }
    if (engineId === undefined) return;
    this.#attempts++;
    this.#upstream = this.#tracer.startSpan(
      this.#attempts === 1 ? 'uis.upstream' : 'uis.upstream.retry',
      {
        kind: SpanKind.CLIENT,
        startTime: now,
        attributes: {
          'uis.replica': engineId,
          'uis.attempt': this.#attempts,
          ...(retryReason === undefined ? {} : { 'uis.retry_reason': retryReason }),
        },
      },
      this.#ctx,
    );
  }

  end(r: {
    model: string;
    status: number;
    error?: string | undefined;
    promptTokens?: number | undefined;
    completionTokens?: number | undefined;
  }): void {
    const now = epochMs();
    this.#route?.end(now);
    const failed = r.error !== undefined || r.status >= 500;
    for (const span of [this.#upstream, this.#root]) {
      if (span === undefined) continue;
      span.setAttribute('http.response.status_code', r.status);
      if (failed) span.setStatus({ code: SpanStatusCode.ERROR, message: r.error ?? `status ${r.status}` });
    }
    this.#upstream?.end(now);
    this.#root.setAttribute('uis.model', r.model);
    if (r.promptTokens !== undefined) this.#root.setAttribute('uis.prompt_tokens', r.promptTokens);
    if (r.completionTokens !== undefined)
      this.#root.setAttribute('uis.completion_tokens', r.completionTokens);
    this.#root.end(now);
  }
}

/**
 * OpenTelemetry tracing of the gateway, made only when `gateway.tracing` is configured (otherwise no tracer exists
 * and the serving path checks one `undefined`): serving requests with their routing decision and engine attempts
 * (the engines get a `traceparent` naming the request's span), phase transitions with their parts, batch runs and
 * weight updates (built from the audit log's timed records). Spans leave in batches over OTLP/HTTP.
 */
export class UisTracing {
  readonly tracer: Tracer;
  readonly #provider: TracerProvider;
  readonly #ratio: number;

  constructor(config: TracingConfig, exporter?: SpanExporter) {
    this.#provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': config.service_name }),
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: exporter ?? new OTLPTraceExporter({ url: config.otlp_endpoint }),
          scheduledDelayMillis: 1000,
        }),
      ],
    });
    this.tracer = this.#provider.getTracer('uis');
    this.#ratio = config.sample_ratio;
  }

  /** A traced serving request, or undefined when the sample ratio leaves it out. */
  request(
    role: string,
    path: string,
    requestId: string,
    traceparent: string | string[] | undefined,
  ): RequestTrace | undefined {
    if (this.#ratio < 1 && Math.random() >= this.#ratio) return undefined;
    return new RequestTrace(this.tracer, `POST ${path}`, remoteParent(traceparent), {
      'uis.role': role,
      'http.request.id': requestId,
    });
  }

  /** A finished piece of work known from its records: `[from, to]` in epoch ms, under `parent` if given. */
  span(
    name: string,
    from: number,
    to: number,
    attributes: Record<string, string | number | boolean>,
    parent?: Span,
    error?: string,
  ): Span {
    const ctx = parent === undefined ? ROOT_CONTEXT : trace.setSpan(ROOT_CONTEXT, parent);
    const span = this.tracer.startSpan(name, { startTime: from, attributes }, ctx);
    if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    // Ended at once: its children are made from its context, which stays valid.
    span.end(to);
    return span;
  }

  forceFlush(): Promise<void> {
    return this.#provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.#provider.shutdown();
  }
}
