import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeader, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { UisError } from '@uis/spec';
import type { AdmissionGate, Admittable } from './admission.ts';
import { collectBody, forwardedBody, type ParsedBody, parseServingBody } from './body.ts';
import { BODY_BUDGET_RETRY_AFTER_S } from './body-budget.ts';
import type { ForwardOutcome } from './completion.ts';
import { engineFailure, gaveUp } from './engine-failure.ts';
import { asUisError, ProxyErrorCode, sendError } from './errors.ts';
import type { FastHandler } from './fast-routes.ts';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.ts';
import { ClientGoneError, canRelayChunked } from './relay-util.ts';
import { nextId, REQUEST_ID } from './request-id.ts';
import { DEFAULT_RETRY_POLICY, retryableCode } from './retry.ts';
import type { ForwardRoute, ProxyTarget, ResolveRoute, ServingProxyOptions } from './route-types.ts';
import {
  errorCode,
  TIMEOUT_CODES,
  type UpstreamController,
  type UpstreamHandler,
} from './upstream/engine-pool.ts';
import type { BodyFraming } from './upstream/http1.ts';
import { type TokenUsage, usageOfBody, usageOfStreamTail } from './usage.ts';

/** Who served a proxied answer: `X-UIS-Engine-Id` and `X-UIS-Weight-Version` (when known), so a caller can see
 * its affinity hold and tag a rollout sample with the policy version that produced it. */
function servedBy(out: OutgoingHttpHeader[], target: ProxyTarget | undefined): OutgoingHttpHeader[] {
  if (target === undefined) return out;
  out.push('x-uis-engine-id', target.id);
  if (target.weightVersion) out.push('x-uis-weight-version', target.weightVersion);
  return out;
}

export type {
  CompletionEvent,
  ForwardOutcome,
  ForwardRoute,
  HandledRoute,
  PickTarget,
  ProxyHooks,
  ProxyTarget,
  ResolveRoute,
  ServingProxyOptions,
} from './route-types.ts';

export const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

/** Sized engine answers up to this many bytes are relayed in one write; larger ones chunk by chunk. */
const MAX_BUFFERED_RESPONSE_BYTES = 1024 * 1024;

const NO_RETRIES: readonly string[] = [];

/**
 * One client request's trip through the proxy. Implements the engine pool's handler directly, so the engine's
 * bytes go from its socket to `res.write` with no stream objects in between; a chunked event stream to an
 * HTTP/1.1 client is relayed with the engine's own chunk framing (one read, one write per event).
 */
class Exchange implements UpstreamHandler, Admittable {
  readonly #res: ServerResponse;
  #opts: ServingProxyOptions;
  readonly #now: () => number;
  readonly #start: number;
  readonly #requestId: string;
  #req: IncomingMessage | undefined;
  #route: ForwardRoute | undefined;
  #upstreamHeaders: string[] = [];
  #body: Buffer = Buffer.alloc(0);
  #rid: string | string[] | undefined;

  #target: ProxyTarget | undefined;
  #holding = false;
  #tried: Set<string> | undefined;
  #attempts = 0;
  #controller: UpstreamController | undefined;
  #gotResponse = false;
  #streaming = false;
  #status = 0;
  #respHeaders: IncomingHttpHeaders | undefined;
  #chunks: Buffer[] = [];
  /** A relayed stream's last two reads: where its final usage is (kept by reference, never copied). */
  #tail: Buffer | undefined;
  #tailPrev: Buffer | undefined;
  #answer: Buffer | undefined;
  #retries: string[] | undefined;
  /** Set while the request waits out a retry's backoff (the client leaving aborts it). */
  #backoff: AbortController | undefined;
  /** The engine's chunked body is relayed with its own framing. */
  #raw = false;
  #rawSocket: Socket | undefined;
  #bytesDown = 0;
  #ttfb: number | undefined;
  #upstreamStartAt: number | undefined;
  #firstOutAt: number | undefined;
  #bodyAt: number | undefined;
  #upstreamDone = false;
  #clientGone = false;
  #finished = false;
  /** The role's admission gate this request waits at, then holds a slot of. */
  #queuedAt: AdmissionGate | undefined;
  #slotOf: AdmissionGate | undefined;

  constructor(
    res: ServerResponse,
    opts: ServingProxyOptions,
    now: () => number,
    start: number,
    requestId: string,
  ) {
    this.#res = res;
    this.#opts = opts;
    this.#now = now;
    this.#start = start;
    this.#requestId = requestId;
    // Anonymous closures on purpose (see collectBody: tsx names each named closure with a defineProperty).
    res.on('close', () => this.#clientClosed());
  }

  /** Starts forwarding `body` along `route`. */
  begin(req: IncomingMessage, body: ParsedBody, route: ForwardRoute): void {
    this.#bodyAt = this.#now() - this.#start;
    if (this.#clientGone) {
      this.#finish('client_abort', 0, undefined);
      return;
    }
    this.#route = route;
    this.#req = req;
    if (route.owner !== undefined) this.#opts = { ...this.#opts, ...route.owner };
    let inject: string | undefined;
    if (body.fields.rid === undefined && this.#opts.injectRid !== false) inject = nextId();
    this.#rid = body.fields.rid ?? inject;
    this.#body = forwardedBody(body, route.edit, inject);
    this.#upstreamHeaders = upstreamRequestHeaders(
      req.rawHeaders,
      this.#requestId,
      route.engineApiKey,
      route.traceparent,
    );
    const gate = this.#opts.admission;
    if (gate === undefined) this.#attempt(route.pick(undefined));
    else {
      this.#queuedAt = gate;
      gate.enter(this);
    }
  }

  admitted(): void {
    this.#slotOf = this.#queuedAt;
    this.#queuedAt = undefined;
    if (this.#clientGone) this.#finish('client_abort', 0, undefined);
    else this.#attempt(this.#route!.pick(undefined));
  }

  turnedAway(err: UisError, retryAfterSeconds: number): void {
    this.#queuedAt = undefined;
    if (!this.#res.headersSent) this.#res.setHeader('retry-after', String(retryAfterSeconds));
    this.#fail(err);
  }

  #attempt(picked: ProxyTarget | UisError): void {
    if (picked instanceof UisError) {
      this.#fail(picked);
      return;
    }
    this.#hold(picked);
    this.#dispatch();
  }

  /** `target` takes this request: it counts in its in-flight figures from now on. */
  #hold(target: ProxyTarget): void {
    this.#target = target;
    this.#attempts++;
    this.#opts.inFlight?.acquire(target.id);
    this.#holding = true;
    this.#upstreamDone = false;
  }

  #dispatch(): void {
    const target = this.#target!;
    this.#controller = undefined;
    try {
      this.#opts.pools
        .get(target.origin)
        .dispatch({ path: this.#route!.path, headers: this.#upstreamHeaders, body: this.#body }, this);
    } catch (e) {
      this.#fail(asUisError(e));
    }
  }

  onRequestStart(controller: UpstreamController): void {
    this.#controller = controller;
    this.#upstreamStartAt = this.#now() - this.#start;
    if (this.#clientGone) controller.abort(new ClientGoneError());
  }

  onResponseStart(
    controller: UpstreamController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    framing: BodyFraming,
  ): void {
    this.#controller = controller;
    this.#gotResponse = true;
    this.#ttfb = this.#now() - this.#start;
    this.#status = statusCode;
    const type = headers['content-type'];
    const length = headers['content-length'];
    // Event streams, bodies of unknown length and large bodies are relayed as they come; a small sized body is
    // collected and sent in one write.
    this.#streaming =
      length === undefined ||
      Number(length) > MAX_BUFFERED_RESPONSE_BYTES ||
      (typeof type === 'string' && type.startsWith('text/event-stream'));
    if (this.#streaming) {
      const res = this.#res;
      if (framing === 'chunked' && canRelayChunked(this.#req!, res) && controller.relayChunked()) {
        // The engine's chunks go out with their framing as they came; node must not frame them again.
        const out = servedBy(clientResponseHeaders(headers, this.#requestId, false), this.#target);
        out.push('transfer-encoding', 'chunked');
        res.writeHead(statusCode, out);
        res.chunkedEncoding = false;
        this.#raw = true;
      } else {
        // A known length is kept (the bytes are relayed unchanged); otherwise node frames the stream itself.
        res.writeHead(
          statusCode,
          servedBy(clientResponseHeaders(headers, this.#requestId, length !== undefined), this.#target),
        );
      }
      // The engine's first bytes usually come in the same read as its headers: they then leave in one write with
      // the headers (one syscall and one client wake-up less per request). Headers alone still go out this turn.
      queueMicrotask(() => this.#flushHeaders());
      if (!this.#clientGone) return;
      controller.abort(new ClientGoneError());
    } else {
      this.#respHeaders = headers;
    }
  }

  onResponseData(controller: UpstreamController, chunk: Buffer): void {
    this.#bytesDown += chunk.length;
    if (!this.#streaming) {
      this.#chunks.push(chunk);
      return;
    }
    this.#tailPrev = this.#tail;
    this.#tail = chunk;
    let ok: boolean;
    const socket = this.#rawSocket;
    if (socket !== undefined) {
      ok = socket.write(chunk);
    } else {
      this.#firstOutAt ??= this.#now() - this.#start;
      ok = this.#res.write(chunk);
      // Once the head has left with the first bytes, a relayed chunked stream's bytes go straight to the client
      // socket: node's response has nothing left to add to them (~2.5 us less per event).
      if (this.#raw) this.#rawSocket = this.#res.socket ?? undefined;
    }
    if (!ok) {
      // The client reads slower than the engine writes: hold the engine socket until the client drains.
      controller.pause();
      (socket ?? this.#res).once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    this.#upstreamDone = true;
    const res = this.#res;
    if (this.#streaming) {
      res.end();
    } else if (!res.destroyed) {
      const body =
        this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#bytesDown);
      res.writeHead(
        this.#status,
        servedBy(clientResponseHeaders(this.#respHeaders ?? {}, this.#requestId, true), this.#target),
      );
      this.#firstOutAt = this.#now() - this.#start;
      res.end(body);
      this.#answer = body;
    }
    this.#finish('ok', this.#status, undefined);
  }

  onResponseError(_controller: UpstreamController, err: Error): void {
    this.#upstreamDone = true;
    if (this.#clientGone || err instanceof ClientGoneError) {
      this.#finish('client_abort', 0, undefined);
      return;
    }
    const code = errorCode(err);
    const target = this.#target!;
    if (this.#gotResponse && this.#streaming) {
      // Bytes already reached the client: a stream is never replayed; cut it so the client sees it broke.
      this.#res.destroy(err);
      this.#finish(
        'error',
        this.#status,
        new UisError({
          code:
            code !== undefined && TIMEOUT_CODES.has(code)
              ? ProxyErrorCode.engineTimeout
              : ProxyErrorCode.engineResponseIncomplete,
          message: `engine ${target.id} broke the stream: ${err.message}`,
        }),
      );
      return;
    }
    // Nothing reached the client: a connection that failed before the engine sent a byte may go elsewhere.
    const failure = engineFailure(err, code, target, this.#gotResponse);
    if (!this.#gotResponse && retryableCode(code) && this.#retry(target, failure)) return;
    this.#fail(this.#retries === undefined ? failure : gaveUp(failure, this.#attempts, this.#tried, target));
  }

  /**
   * Sends the request to a replica it has not tried, after the retry policy's wait (see retry.ts for what is
   * retried), when the budget allows and routing has one (open circuits are skipped). The next replica holds the
   * request during the wait. False: answer `failure`.
   */
  #retry(target: ProxyTarget, failure: UisError): boolean {
    const policy = this.#opts.retry ?? DEFAULT_RETRY_POLICY;
    if (this.#attempts > policy.maxRetries) return false;
    this.#tried ??= new Set();
    this.#tried.add(target.id);
    const next = this.#route!.pick(this.#tried);
    if (next instanceof UisError) return false; // no other replica: report why this one failed
    this.#release();
    this.#opts.hooks?.onAttemptFailed?.(target, failure.code);
    this.#retries ??= [];
    this.#retries.push(failure.code);
    this.#hold(next);
    const backoff = new AbortController();
    this.#backoff = backoff;
    policy.wait(this.#attempts - 1, backoff.signal).then(
      () => {
        this.#backoff = undefined;
        this.#dispatch();
      },
      () => {
        this.#backoff = undefined;
        this.#finish('client_abort', 0, undefined);
      },
    );
    return true;
  }

  /** Answers with an error (nothing has been sent yet) and ends the exchange. */
  #fail(err: UisError): void {
    sendError(this.#res, err, this.#requestId, this.#opts.errorBody);
    this.#finish('error', err.status, err);
  }

  #flushHeaders(): void {
    // `headersSent` turns true at writeHead already; what matters is whether a body write carried them out.
    if (this.#firstOutAt === undefined && !this.#upstreamDone && !this.#res.destroyed)
      this.#res.flushHeaders();
  }

  #clientClosed(): void {
    if (this.#res.writableFinished || this.#upstreamDone) return;
    this.#clientGone = true;
    const target = this.#target;
    if (this.#queuedAt !== undefined) {
      // Left while waiting for an admission slot: it never holds one.
      this.#queuedAt.cancel(this);
      this.#queuedAt = undefined;
      this.#finish('client_abort', 0, undefined);
      return;
    }
    if (target === undefined) return; // still reading the body or resolving: nothing upstream yet
    if (this.#backoff !== undefined) {
      this.#backoff.abort(); // waiting to retry: the next engine never saw the request
      return;
    }
    this.#controller?.abort(new ClientGoneError());
    if (this.#rid !== undefined) this.#opts.hooks?.onClientAbort?.(this.#rid, target, this.#requestId);
  }

  #release(): void {
    if (!this.#holding) return;
    this.#holding = false;
    this.#opts.inFlight?.release(this.#target!.id);
  }

  #finish(outcome: ForwardOutcome, status: number, error: UisError | undefined): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#release();
    const slot = this.#slotOf;
    this.#slotOf = undefined;
    slot?.leave();
    const onComplete = this.#opts.hooks?.onComplete;
    if (onComplete === undefined) return;
    onComplete({
      requestId: this.#requestId,
      rid: this.#rid,
      target: this.#target,
      status,
      outcome,
      error,
      attempts: this.#attempts,
      retries: this.#retries ?? NO_RETRIES,
      streamed: this.#streaming,
      usage: outcome === 'ok' && this.#status < 400 ? this.#usage() : undefined,
      bytesUp: this.#body.length,
      bytesDown: this.#bytesDown,
      bodyMs: this.#bodyAt,
      upstreamStartMs: this.#upstreamStartAt,
      ttfbMs: this.#ttfb,
      firstByteOutMs: this.#firstOutAt,
      totalMs: this.#now() - this.#start,
    });
  }

  #usage(): TokenUsage | undefined {
    if (!this.#streaming) return this.#answer === undefined ? undefined : usageOfBody(this.#answer);
    const tail = this.#tail;
    if (tail === undefined) return undefined;
    return usageOfStreamTail(this.#tailPrev === undefined ? tail : Buffer.concat([this.#tailPrev, tail]));
  }

  /** Ends a request refused before forwarding (bad body, unknown model...). */
  refuse(err: UisError): void {
    this.#fail(err);
  }
}

/**
 * The serving hot path for one route: read and parse the body once, let `resolve` pick the route, forward to an
 * engine through the pooled undici dispatcher, relay the answer. Every failure answers the product's JSON error.
 */
export function createServingHandler(options: ServingProxyOptions, resolve: ResolveRoute): FastHandler {
  const now = options.now ?? (() => performance.now());
  const newId = options.newId ?? nextId;
  const limit = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return (req, res) => {
    const start = now();
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && REQUEST_ID.test(given) ? given : newId();
    const exchange = new Exchange(res, options, now, start, requestId);
    collectBody(
      req,
      limit,
      (err, raw) => {
        if (err !== null || raw === undefined) {
          // A body refused before its end: answer, then close, since the rest of the body is still on the socket.
          if (err instanceof UisError && (err.status === 413 || err.status === 503))
            res.shouldKeepAlive = false;
          if (err instanceof UisError && err.code === 'body_budget_exhausted')
            res.setHeader('retry-after', String(BODY_BUDGET_RETRY_AFTER_S));
          exchange.refuse(asUisError(err));
          return;
        }
        try {
          const body = parseServingBody(raw, options.maxJsonDepth);
          if (body instanceof UisError) return exchange.refuse(body);
          const route = resolve(body, req, requestId, res);
          if (route instanceof UisError) return exchange.refuse(route);
          if ('respond' in route) return route.respond(res);
          exchange.begin(req, body, route);
        } catch (e) {
          exchange.refuse(asUisError(e));
        }
      },
      options.bodyBudget,
    );
  };
}
