import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InferenceRoleSpec } from '@uis/spec';
import { UisError } from '@uis/spec';
import {
  engineFailure,
  errorCode,
  gaveUp,
  type InFlightCounter,
  type ParsedBody,
  type ProxyTarget,
  type RetryPolicy,
  retryableCode,
  sendError,
  type TokenUsage,
  type UpstreamPools,
  usageOfBody,
} from '../proxy/index.ts';
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
  /** The serving proxy's retry rules (count, waits); the adapter follows them too. */
  retry: RetryPolicy;
  /** An attempt failed and the call goes to another replica (its circuit counts the failure). */
  attemptFailed(target: ProxyTarget, code: string): void;
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
async function attemptGenrm<M extends Resolved, K>(
  host: GenrmHost<M, K>,
  target: ProxyTarget,
  payload: Buffer,
  requestId: string,
  engineApiKey: string | undefined,
  signal: AbortSignal,
  start: number,
): Promise<Attempt> {
  let responded = false;
  try {
    const r = await host.pools.get(target.origin).request(
      {
        path: '/v1/chat/completions',
        headers: [
          'content-type',
          'application/json',
          'x-request-id',
          requestId,
          // The model's engine key, never the client's credentials (the adapter builds its own request).
          ...(engineApiKey ? ['authorization', `Bearer ${engineApiKey}`] : []),
        ],
        body: payload,
      },
      signal,
      () => {
        responded = true;
      },
    );
    const ttfb = host.now() - start;
    const text = r.body.toString('utf8');
    if (r.statusCode !== 200) {
      const err = new UisError({
        code: 'engine_error',
        relayedStatus: r.statusCode < 500 ? r.statusCode : undefined,
        message: `GenRM engine ${target.id} answered ${r.statusCode}: ${text.slice(0, 500)}`,
      });
      return { answered: true, status: err.status, json: undefined, err, ttfb };
    }
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      answer = undefined;
    }
    const out = genrmResponse(answer);
    if (out instanceof UisError)
      return { answered: true, status: out.status, json: undefined, err: out, ttfb };
    return {
      answered: true,
      status: 200,
      json: JSON.stringify(out),
      err: undefined,
      ttfb,
      usage: usageOfBody(r.body),
    };
  } catch (e) {
    const err = e instanceof Error ? e : new Error(String(e));
    const code = errorCode(err);
    // The same rule as the serving proxy (retry.ts): only a connection that failed before any answer byte.
    return {
      answered: false,
      err: engineFailure(err, code, target, responded),
      retryable: !responded && retryableCode(code),
    };
  }
}

/** Relax's GenRM call: resolve the model, call the engine's chat completions with the merged sampling parameters
 * (retried elsewhere by the proxy's retry rules while no engine answered), answer `{"response": "<text>"}`
 * stripped. */
export async function genrmCall<M extends Resolved, K>(
  host: GenrmHost<M, K>,
  body: ParsedBody,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
): Promise<void> {
  const start = host.now();
  const retries: string[] = [];
  const finish = (
    status: number,
    err: UisError | undefined,
    model: string,
    engine?: { id: string; ttfb?: number; usage?: TokenUsage | undefined },
  ) => {
    if (err) sendError(res, err, requestId);
    host.served({
      requestId,
      model,
      engineId: engine?.id,
      status,
      outcome: err ? 'error' : 'ok',
      totalMs: host.now() - start,
      ttfbMs: engine?.ttfb,
      usage: engine?.usage,
      upstreamError: engine !== undefined && err !== undefined ? err.code : undefined,
      retries: retries.length > 0 ? retries : undefined,
      error: err?.message,
    });
  };
  const parsed = parseGenrmRequest(body.json);
  if (parsed instanceof UisError) return finish(400, parsed, '(none)');
  const keys = host.keys(body, req);
  const model = host.resolveModel(keys, body, res);
  if (model instanceof UisError) return finish(model.status, model, refusedModel(model) ?? '(none)');
  const spec = host.spec.models.find((m) => m.name === model.name);
  // SGLang takes a rid on chat too: a client that leaves is aborted at the engine by it, as on the fast path.
  const rid = typeof parsed.rid === 'string' && parsed.rid !== '' ? parsed.rid : randomUUID();
  const payload = Buffer.from(
    JSON.stringify({
      ...genrmChatBody(parsed, spec ?? { sampling_defaults: {}, chat_template_kwargs: {} }, model.servedName),
      rid,
    }),
  );
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
  let target = host.pick(model, keys, res, tried);
  if (target instanceof UisError) return finish(target.status, target, model.name);
  for (let attempt = 0; ; attempt++) {
    current = target;
    host.inFlight.acquire(target.id);
    let result: Attempt | undefined;
    try {
      waiting = attempt > 0;
      if (waiting) await host.retry.wait(attempt, controller.signal);
      waiting = false;
      result = await attemptGenrm(
        host,
        target,
        payload,
        requestId,
        spec?.engine_api_key,
        controller.signal,
        start,
      );
    } catch {
      // Only the wait throws, when the client left during it.
    } finally {
      host.inFlight.release(target.id);
    }
    if (result === undefined || controller.signal.aborted)
      return finish(0, undefined, model.name, { id: target.id });
    if (result.answered) {
      const engine = { id: target.id, ttfb: result.ttfb, usage: result.usage };
      if (result.json === undefined) return finish(result.status, result.err, model.name, engine);
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(result.json),
        'x-request-id': requestId,
      });
      res.end(result.json);
      return finish(200, undefined, model.name, engine);
    }
    const failed = retries.length > 0 ? gaveUp(result.err, attempt + 1, tried, target) : result.err;
    if (!result.retryable || attempt >= host.retry.maxRetries)
      return finish(failed.status, failed, model.name, { id: target.id });
    tried.add(target.id);
    const next = host.pick(model, keys, res, tried);
    if (next instanceof UisError) return finish(failed.status, failed, model.name, { id: target.id });
    host.attemptFailed(target, result.err.code);
    retries.push(result.err.code);
    target = next;
  }
}
