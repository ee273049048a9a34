import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { type InferenceRoleSpec, UisError } from '@uis/spec';
import {
  engineFailure,
  errorCode,
  gaveUp,
  type InFlightCounter,
  type ParsedBody,
  ProxyErrorCode,
  type ProxyTarget,
  type RetryPolicy,
  retryableCode,
  sendError,
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
  keys(body: ParsedBody, req: IncomingMessage): K;
  resolveModel(keys: K, body: ParsedBody, res: ServerResponse): M | UisError;
  pick(model: M, keys: K, res: ServerResponse, excluding: ReadonlySet<string>): ProxyTarget | UisError;
  abortAtEngine(rid: string, target: ProxyTarget, requestId: string): void;
  /** The serving proxy's retry rules (count, waits); the adapter follows them too. */
  retry: RetryPolicy;
  /** An attempt failed and the call goes to another replica (its circuit counts the failure). */
  attemptFailed(target: ProxyTarget, code: string): void;
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
  /** The last failed attempt, once one was retried away from. */
  failure: { err: UisError; target: ProxyTarget } | undefined;
  traced: RequestTrace | undefined;
  readonly #start: number;

  constructor(
    private readonly host: Pick<GenrmHost<Resolved, unknown>, 'served'>,
    private readonly res: ServerResponse,
    readonly requestId: string,
  ) {
    this.#start = performance.now();
  }

  get elapsed(): number {
    return performance.now() - this.#start;
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
 * (retried elsewhere by the serving proxy's retry rules while no engine answered), answer `{"response": "<text>"}`
 * stripped. Traced like every serving request when tracing is on (the request, its routing decision, each engine
 * attempt). */
export async function genrmCall<M extends Resolved, K>(
  host: GenrmHost<M, K>,
  body: ParsedBody,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
): Promise<void> {
  const out = new GenrmOutcome(host, res, requestId);
  const parsed = parseGenrmRequest(body.json);
  if (parsed instanceof UisError) return out.finish(parsed.status, parsed, '(none)');
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
  let waiting = false;
  res.on('close', () => {
    if (res.writableFinished || controller.signal.aborted) return;
    controller.abort();
    // During a retry's wait the next engine has not seen the call: nothing to abort there.
    if (current !== undefined && !waiting) host.abortAtEngine(rid, current, requestId);
  });
  const tried = new Set<string>();
  for (let attempt = 0; ; attempt++) {
    const target = host.pick(model, keys, res, tried);
    out.traced?.attempt(
      target instanceof UisError ? undefined : target.id,
      attempt === 0 ? undefined : ProxyErrorCode.engineUnreachable,
    );
    if (target instanceof UisError) {
      // No other replica: the answer is why the last one failed.
      const last = out.failure;
      return last === undefined
        ? out.finish(target.status, target, model.name)
        : out.finish(last.err.status, last.err, model.name, { id: last.target.id });
    }
    current = target;
    host.inFlight.acquire(target.id);
    let result: Attempt | undefined;
    try {
      waiting = attempt > 0;
      // The next replica holds the call during the wait, as on the proxy's fast path.
      if (waiting) await host.retry.wait(attempt, controller.signal);
      waiting = false;
      result = await callEngine({ host, target, headers, payload, signal: controller.signal }, out);
    } catch {
      // Only the wait throws, when the client left during it.
    } finally {
      host.inFlight.release(target.id);
    }
    if (result === undefined || controller.signal.aborted)
      return out.finish(0, undefined, model.name, { id: target.id });
    if (result.answered) return answer(res, out, result, model.name, target);
    const err = attempt > 0 ? gaveUp(result.err, attempt + 1, tried, target) : result.err;
    if (!result.retryable || attempt >= host.retry.maxRetries)
      return out.finish(err.status, err, model.name, { id: target.id });
    tried.add(target.id);
    out.failure = { err, target };
    host.attemptFailed(target, result.err.code);
    out.retries.push(result.err.code);
  }
}

/** The W3C trace context the engine gets: the adapter's request span when traced, else the client's own. */
function traceHeaders(req: IncomingMessage, traced: RequestTrace | undefined): string[] {
  if (traced !== undefined) return ['traceparent', traced.traceparent];
  const client = req.headers.traceparent;
  return typeof client === 'string' ? ['traceparent', client] : [];
}

/** One attempt's end: the engine's answer (a 200 reshaped, or its refusal), or a failure before any answer. */
type Attempt =
  | {
      answered: true;
      status: number;
      json: string | undefined;
      err: UisError | undefined;
      ttfb: number;
      usage?: TokenUsage;
    }
  | { answered: false; err: UisError; retryable: boolean };

/** Sends the GenRM chat call to `target` once and reads the whole answer. Never throws. */
async function callEngine(
  call: {
    host: Pick<GenrmHost<Resolved, unknown>, 'pools'>;
    target: ProxyTarget;
    headers: string[];
    payload: Buffer;
    signal: AbortSignal;
  },
  out: GenrmOutcome,
): Promise<Attempt> {
  const { host, target } = call;
  let responded = false;
  try {
    const r = await host.pools
      .get(target.origin)
      .request(
        { path: '/v1/chat/completions', headers: call.headers, body: call.payload },
        call.signal,
        () => {
          responded = true;
        },
      );
    const ttfb = out.elapsed;
    const text = r.body.toString('utf8');
    if (r.statusCode !== 200) {
      const err = new UisError({
        code: 'engine_error',
        relayedStatus: r.statusCode < 500 ? r.statusCode : undefined,
        message: `GenRM engine ${target.id} answered ${r.statusCode}: ${text.slice(0, 500)}`,
      });
      return { answered: true, status: err.status, json: undefined, err, ttfb };
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const response = genrmResponse(parsed);
    if (response instanceof UisError)
      return { answered: true, status: response.status, json: undefined, err: response, ttfb };
    const json = JSON.stringify(response);
    return { answered: true, status: 200, json, err: undefined, ttfb, usage: usageOfBody(r.body) };
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    const code = errorCode(err);
    // The serving proxy's rule (retry.ts): only a connection that failed before any answer byte goes elsewhere.
    return {
      answered: false,
      err: engineFailure(err, code, target, responded),
      retryable: !responded && retryableCode(code),
    };
  }
}

/** Sends the engine's answer (reshaped) or its refusal, and ends the call. */
function answer(
  res: ServerResponse,
  out: GenrmOutcome,
  result: Extract<Attempt, { answered: true }>,
  model: string,
  target: ProxyTarget,
): void {
  const engine = { id: target.id, ttfb: result.ttfb, usage: result.usage };
  if (result.json === undefined) {
    out.finish(result.status, result.err, model, engine);
    return;
  }
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(result.json),
    'x-request-id': out.requestId,
  });
  res.end(result.json);
  out.finish(200, undefined, model, engine);
}
