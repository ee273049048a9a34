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

/** Relax's GenRM call: resolve the model, call the engine's chat completions with the merged sampling parameters
 * (one retry elsewhere if the engine is unreachable), answer `{"response": "<text>"}` stripped. */
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
  const payload = JSON.stringify({
    ...genrmChatBody(parsed, spec ?? { sampling_defaults: {}, chat_template_kwargs: {} }, model.servedName),
    rid,
  });
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
    if (target instanceof UisError) return finish(target.status, target, model.name);
    current = target;
    host.inFlight.acquire(target.id);
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
            ...(spec?.engine_api_key ? ['authorization', `Bearer ${spec.engine_api_key}`] : []),
          ],
          body: Buffer.from(payload),
        },
        controller.signal,
      );
      const engine = { id: target.id, ttfb: host.now() - start };
      const text = r.body.toString('utf8');
      if (r.statusCode !== 200) {
        const err = new UisError({
          code: 'engine_error',
          relayedStatus: r.statusCode < 500 ? r.statusCode : undefined,
          message: `GenRM engine ${target.id} answered ${r.statusCode}: ${text.slice(0, 500)}`,
        });
        return finish(err.status, err, model.name, engine);
      }
      let answer: unknown;
      try {
        answer = JSON.parse(text);
      } catch {
        answer = undefined;
      }
      const out = genrmResponse(answer);
      if (out instanceof UisError) return finish(out.status, out, model.name, engine);
      const json = JSON.stringify(out);
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(json),
        'x-request-id': requestId,
      });
      res.end(json);
      return finish(200, undefined, model.name, { ...engine, usage: usageOfBody(r.body) });
    } catch (e) {
      if (controller.signal.aborted) return finish(0, undefined, model.name, { id: target.id });
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string' && TIMEOUT_CODES.has(code)) {
        const err = new UisError({
          code: ProxyErrorCode.engineTimeout,
          message: `GenRM engine ${target.id} did not answer in time`,
        });
        return finish(504, err, model.name, { id: target.id });
      }
      tried.add(target.id);
      if (attempt === 1) {
        const err = new UisError({
          code: ProxyErrorCode.engineUnreachable,
          message: `GenRM engine ${target.id} is unreachable: ${e instanceof Error ? e.message : String(e)}`,
        });
        return finish(502, err, model.name, { id: target.id });
      }
      retries.push(ProxyErrorCode.engineUnreachable);
    } finally {
      host.inFlight.release(target.id);
    }
  }
}
