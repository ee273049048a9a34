import type { Logger } from '@uis/spec';
import type { GatewayMetrics } from '../metrics/gateway-metrics.ts';
import type { CompletionEvent } from '../proxy/index.ts';
import type { RequestTrace } from '../tracing/tracing.ts';
import { accessLine, type ServedRequest } from './access-log.ts';
import type { ReplicaBreakers } from './replica-breakers.ts';

export type { ServedRequest } from './access-log.ts';

/** A served request's log fields: its id and what the entry says, less the time it was recorded. */
function logFields(entry: ServedRequest, requestId: string): object {
  const { at: _at, ...rest } = entry;
  return { requestId, ...rest };
}

/** Replica ids of this prefix are SGLang routers, not engines: no circuit of ours. */
export const ROUTER_PREFIX = 'router:';

/** The engine error a finished request met, if an engine was involved: the proxy's error code, or
 * `engine_status_5xx` when the engine itself answered a server error. Refusals before any engine are not upstream
 * errors. */
function upstreamErrorOf(e: CompletionEvent): string | undefined {
  if (e.target === undefined) return undefined;
  if (e.error !== undefined) return e.error.code;
  return e.outcome === 'ok' && e.status >= 500 ? 'engine_status_5xx' : undefined;
}

export interface ServedRequestsOptions {
  role: string;
  breakers: ReplicaBreakers;
  metrics?: GatewayMetrics | undefined;
  logger: Logger;
  onServed?: ((r: ServedRequest) => void) | undefined;
  accessLog: boolean;
}

/** The end of one role's serving requests: which model and trace each request in flight has, and, when it ends,
 * its replica's circuit, the metrics, the trace, the console's history, the access log and the log line. */
export class ServedRequests {
  /** The model of each refused request of a known model (a routed request carries its model itself). */
  private readonly models = new Map<string, string>();
  private readonly traces = new Map<string, RequestTrace>();

  constructor(private readonly opts: ServedRequestsOptions) {}

  /** Records the model of a request refused before it was routed (a sleeping or draining model still counts
   * under its name). */
  refused(requestId: string, model: string): void {
    this.models.set(requestId, model);
  }

  /** Records the trace of a request the gateway routes (tracing on). */
  traced(requestId: string, trace: RequestTrace): void {
    this.traces.set(requestId, trace);
  }

  /** The proxy's end of a request. */
  completed(e: CompletionEvent): void {
    this.judge(e);
    let model = e.model;
    if (this.models.size > 0 && model === undefined) {
      model = this.models.get(e.requestId);
      this.models.delete(e.requestId);
    }
    model ??= '(none)';
    if (this.traces.size > 0) this.endTrace(e, model);
    // The first byte handed to the client: for a stream, the first token (headers leave with it).
    const ttfbMs = e.firstByteOutMs ?? e.ttfbMs;
    // Built field by field, once: object spread and rest copies were ~2.5 % of the ceiling path's CPU.
    this.report(
      {
        role: this.opts.role,
        model,
        engineId: e.target?.id,
        status: e.status,
        outcome: e.outcome,
        totalMs: e.totalMs,
        ttfbMs,
        ttftMs: e.streamed ? ttfbMs : undefined,
        usage: e.usage,
        retries: e.retries.length > 0 ? e.retries : undefined,
        upstreamError: upstreamErrorOf(e),
        error: e.error?.message,
        at: Date.now(),
      },
      e.requestId,
    );
  }

  /** A request's report from a route that answers by itself (the GenRM adapter). */
  served(r: Omit<ServedRequest, 'role' | 'at'> & { requestId: string }): void {
    const { requestId, ...rest } = r;
    this.report({ role: this.opts.role, at: Date.now(), ...rest }, requestId);
  }

  private report(entry: ServedRequest, requestId: string): void {
    const { metrics, logger } = this.opts;
    metrics?.observeRequest(entry);
    this.opts.onServed?.(entry);
    if (this.opts.accessLog) logger.info(accessLine(entry, requestId), 'access');
    // Refusals by design (4xx, 503 for a model that is not ready) are the service working: debug, not warn.
    if (entry.status >= 500 && entry.status !== 503)
      logger.warn(logFields(entry, requestId), 'request failed');
    else if (entry.outcome === 'error' && entry.status < 400)
      logger.warn(logFields(entry, requestId), 'stream broke');
    else if (logger.isLevelEnabled?.('debug') ?? true)
      logger.debug(logFields(entry, requestId), 'request served');
  }

  /** The end of a request a route answered by itself (the GenRM adapter): its replica's circuit, then the rest. */
  servedByAdapter(r: Omit<ServedRequest, 'role' | 'at'> & { requestId: string }): void {
    // A refusal the engine answered (4xx) is an answer, not a failure of the replica.
    const failed = r.upstreamError !== undefined && r.status >= 500;
    this.judgeReplica(r.engineId, failed, !failed && r.status > 0);
    this.served(r);
  }

  /** The circuit of the replica a request ended on: an engine failure counts against it, an answer closes it. */
  private judge(e: CompletionEvent): void {
    this.judgeReplica(e.target?.id, upstreamErrorOf(e) !== undefined, e.outcome === 'ok');
  }

  private judgeReplica(id: string | undefined, failed: boolean, ok: boolean): void {
    if (id === undefined || id.startsWith(ROUTER_PREFIX)) return;
    if (failed) this.opts.breakers.failure(id);
    else if (ok) this.opts.breakers.success(id);
    else this.opts.breakers.settle(id);
  }

  private endTrace(e: CompletionEvent, model: string): void {
    const traced = this.traces.get(e.requestId);
    if (traced === undefined) return;
    this.traces.delete(e.requestId);
    traced.end({
      model,
      status: e.status,
      error: e.error?.code,
      promptTokens: e.usage?.prompt,
      completionTokens: e.usage?.completion,
    });
  }
}
