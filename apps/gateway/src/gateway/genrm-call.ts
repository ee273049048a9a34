import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InferenceRoleSpec } from '@uis/spec';
import { UisError } from '@uis/spec';
import {
  type InFlightCounter,
  type ParsedBody,
  ProxyErrorCode,
  type ProxyTarget,
  sendError,
  TIMEOUT_CODES,
  type TokenUsage,
  type UpstreamPools,
  usageOfBody,
} from '../proxy/index.ts';
import type { RequestTrace } from '../tracing/tracing.ts';
import { genrmChatBody, genrmResponse, parseGenrmRequest } from './genrm-adapter.ts';

/** A model the routing resolved: its name, the name engines answer to. */
interface Resolved {
  name: string;
  servedName: string;
}

/** What the GenRM call needs of its role's gateway (routing, in-flight counting, pools, the served record). */
export interface GenrmHost<M extends Resolved, K> {
  spec: InferenceRoleSpec;
  pools: UpstreamPools;
  inFlight: InFlightCounter;
  now(): number;
  keys(body: ParsedBody, req: IncomingMessage): K;
  resolveModel(keys: K, body: ParsedBody, res: ServerResponse): M | UisError;
  pick(model: M, keys: K, res: ServerResponse, excluding: ReadonlySet<string>): ProxyTarget | UisError;
  abortAtEngine(rid: string, target: ProxyTarget, requestId: string): void;
  /** The request's trace when tracing is on and the request is sampled. */
  trace(req: IncomingMessage, requestId: string): RequestTrace | undefined;
  served(r: {
    requestId: string;
    model: string;
    engineId: string | undefined;
    status: number;
    outcome: 'ok' | 'error';
    totalMs: number;
    ttfbMs: number | undefined;
    usage?: TokenUsage | undefined;
    upstreamError?: string | undefined;
    retries?: readonly string[] | undefined;
    error: string | undefined;
  }): void;
}

/** The model a routing refusal concerns, when it names one (`model_not_ready` does). */
export function refusedModel(err: UisError): string | undefined {
  const d = err.details as { model?: unknown } | undefined;
  return typeof d?.model === 'string' ? d.model : undefined;
}

/** The end of one GenRM call: its error answer (if any), its report to the served record and its trace. */
class GenrmOutcome {
  readonly retries: string[] = [];
  traced: RequestTrace | undefined;
  readonly #start: number;

  constructor(
    private readonly host: Pick<GenrmHost<Resolved, unknown>, 'now' | 'served'>,
    private readonly res: ServerResponse,
    readonly requestId: string,
  ) {
    this.#start = host.now();
  }

  get elapsed(): number {
    return this.host.now() - this.#start;
  }

  finish(
    status: number,
    err: UisError | undefined,
    model: string,
    engine?: { id: string; ttfb?: number; usage?: TokenUsage | undefined },
  ): void {
    if (err) sendError(this.res, err, this.requestId);
    this.host.served({
      requestId: this.requestId,
      model,
      engineId: engine?.id,
      status,
      outcome: err ? 'error' : 'ok',
      totalMs: this.elapsed,
      ttfbMs: engine?.ttfb,
      usage: engine?.usage,
      upstreamError: engine !== undefined && err !== undefined ? err.code : undefined,
      retries: this.retries.length > 0 ? this.retries : undefined,
      error: err?.message,
    });
    this.traced?.end({
      model,
      status,
      error: err?.code,
      promptTokens: engine?.usage?.prompt,
      completionTokens: engine?.usage?.completion,
    });
  }
}

/** Relax's GenRM call: resolve the model, call the engine's chat completions with the merged sampling parameters
 * (one retry elsewhere if the engine is unreachable), answer `{"response": "<text>"}` stripped. Traced like every
 * serving request when tracing is on (the request, its routing decision, each engine attempt). */
export async function genrmCall<M extends Resolved, K>(
  host: GenrmHost<M, K>,
  body: ParsedBody,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
): Promise<void> {
  const out = new GenrmOutcome(host, res, requestId);
  const parsed = parseGenrmRequest(body.json);
  if (parsed instanceof UisError) return out.finish(400, parsed, '(none)');
  const keys = host.keys(body, req);
  const model = host.resolveModel(keys, body, res);
  if (model instanceof UisError) return out.finish(model.status, model, refusedModel(model) ?? '(none)');
  out.traced = host.trace(req, requestId);
  const spec = host.spec.models.find((m) => m.name === model.name);
  // SGLang takes a rid on chat too: a client that leaves is aborted at the engine by it, as on the fast path.
  const rid = typeof parsed.rid === 'string' && parsed.rid !== '' ? parsed.rid : randomUUID();
  const payload = Buffer.from(
    JSON.stringify({
      ...genrmChatBody(parsed, spec ?? { sampling_defaults: {}, chat_template_kwargs: {} }, model.servedName),
      rid,
    }),
  );
  const headers = [
    'content-type',
    'application/json',
    'x-request-id',
    requestId,
    // The model's engine key, never the client's credentials (the adapter builds its own request).
    ...(spec?.engine_api_key ? ['authorization', `Bearer ${spec.engine_api_key}`] : []),
    ...traceHeaders(req, out.traced),
  ];
  const controller = new AbortController();
  let current: ProxyTarget | undefined;
  res.on('close', () => {
    if (res.writableFinished || controller.signal.aborted) return;
    controller.abort();
    if (current !== undefined) host.abortAtEngine(rid, current, requestId);
  });
  const tried = new Set<string>();
  for (let attempt = 0; attempt < 2; attempt++) {
    const target = host.pick(model, keys, res, tried);
    out.traced?.attempt(
      target instanceof UisError ? undefined : target.id,
      attempt === 0 ? undefined : ProxyErrorCode.engineUnreachable,
    );
    if (target instanceof UisError) return out.finish(target.status, target, model.name);
    current = target;
    const sent = { host, target, headers, payload, signal: controller.signal, model: model.name };
    if ((await callEngine(sent, res, out, attempt === 1)) === 'answered') return;
    tried.add(target.id);
    out.retries.push(ProxyErrorCode.engineUnreachable);
  }
}

/** The W3C trace context the engine gets: the adapter's request span when traced, else the client's own. */
function traceHeaders(req: IncomingMessage, traced: RequestTrace | undefined): string[] {
  if (traced !== undefined) return ['traceparent', traced.traceparent];
  const client = req.headers.traceparent;
  return typeof client === 'string' ? ['traceparent', client] : [];
}

/** One engine attempt: `answered` when the call ended (answer, refusal, timeout, client gone, or the last
 * attempt's unreachable engine), `retry` when the engine was unreachable and another may answer. */
async function callEngine(
  call: {
    host: Pick<GenrmHost<Resolved, unknown>, 'pools' | 'inFlight'>;
    target: ProxyTarget;
    headers: string[];
    payload: Buffer;
    signal: AbortSignal;
    model: string;
  },
  res: ServerResponse,
  out: GenrmOutcome,
  last: boolean,
): Promise<'answered' | 'retry'> {
  const { host, target, model } = call;
  host.inFlight.acquire(target.id);
  try {
    const r = await host.pools
      .get(target.origin)
      .request({ path: '/v1/chat/completions', headers: call.headers, body: call.payload }, call.signal);
    const engine = { id: target.id, ttfb: out.elapsed };
    const text = r.body.toString('utf8');
    if (r.statusCode !== 200) {
      const err = new UisError({
        code: 'engine_error',
        relayedStatus: r.statusCode < 500 ? r.statusCode : undefined,
        message: `GenRM engine ${target.id} answered ${r.statusCode}: ${text.slice(0, 500)}`,
      });
      out.finish(err.status, err, model, engine);
      return 'answered';
    }
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      answer = undefined;
    }
    const response = genrmResponse(answer);
    if (response instanceof UisError) {
      out.finish(response.status, response, model, engine);
      return 'answered';
    }
    const json = JSON.stringify(response);
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(json),
      'x-request-id': out.requestId,
    });
    res.end(json);
    out.finish(200, undefined, model, { ...engine, usage: usageOfBody(r.body) });
    return 'answered';
  } catch (e) {
    if (call.signal.aborted) {
      out.finish(0, undefined, model, { id: target.id });
      return 'answered';
    }
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && TIMEOUT_CODES.has(code)) {
      const err = new UisError({
        code: ProxyErrorCode.engineTimeout,
        message: `GenRM engine ${target.id} did not answer in time`,
      });
      out.finish(504, err, model, { id: target.id });
      return 'answered';
    }
    if (!last) return 'retry';
    const err = new UisError({
      code: ProxyErrorCode.engineUnreachable,
      message: `GenRM engine ${target.id} is unreachable: ${e instanceof Error ? e.message : String(e)}`,
    });
    out.finish(502, err, model, { id: target.id });
    return 'answered';
  } finally {
    host.inFlight.release(target.id);
  }
}
