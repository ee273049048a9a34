import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeader, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  canMoveExchange,
  EXCHANGE_MOVES,
  type ExchangeMove,
  type ExchangeState,
  relaysStream,
  UisError,
} from '@uis/spec';
import type { AdmissionGate, Admittable } from './admission.ts';
import { type ForwardedBody, forwardedBody, type ParsedBody } from './body.ts';

import { engineFailure, gaveUp } from './engine-failure.ts';
import { asUisError, ProxyErrorCode, sendError } from './errors.ts';
import { clientResponseHeaders, upstreamRequestHeaders } from './headers.ts';
import type { OpenAIStreamVersions } from './openai-stream-versions.ts';
import { ownedOptions } from './owned-options.ts';
import { ClientGoneError, canRelayChunked } from './relay-util.ts';
import { DEFAULT_RETRY_POLICY, retryableCode } from './retry.ts';
import type { ForwardOutcome, ForwardRoute, ProxyTarget, ServingProxyOptions } from './route-types.ts';
import {
  errorCode,
  TIMEOUT_CODES,
  type UpstreamController,
  type UpstreamHandler,
} from './upstream/engine-pool.ts';
import type { BodyFraming } from './upstream/http1.ts';
import { type TokenUsage, usageOfBody, usageOfStreamTail } from './usage.ts';
import {
  declarationHeaders,
  declarationOf,
  declaredVersions,
  readAnswerVersions,
  withFingerprint,
  withUnsplitVersions,
} from './weight-declaration.ts';

/** Who served a proxied answer: `X-UIS-Engine-Id` and `X-UIS-Weight-Version` (when known), so a caller can see
 * its affinity hold and tag a rollout sample with the policy version that produced it. */
function servedBy(out: OutgoingHttpHeader[], target: ProxyTarget | undefined): OutgoingHttpHeader[] {
  if (target === undefined) return out;
  out.push('x-uis-engine-id', target.id);
  if (target.weightVersion) out.push('x-uis-weight-version', target.weightVersion);
  return out;
}

/** Sized engine answers up to this many bytes are relayed in one write; larger ones chunk by chunk. */
const MAX_BUFFERED_RESPONSE_BYTES = 1024 * 1024;

const NO_RETRIES: readonly string[] = [];
/** Before the body is read (shared: an exchange makes nothing it may not need). */
const NO_BODY: ForwardedBody = { prefix: '', bytes: Buffer.alloc(0) };
const NO_HEADERS: readonly string[] = [];

/**
 * One client request's trip through the proxy. Implements the engine pool's handler directly, so the engine's
 * bytes go from its socket to `res.write` with no stream objects in between; a chunked event stream to an
 * HTTP/1.1 client is relayed with the engine's own chunk framing (one read, one write per event). Its one state
 * moves through spec's `EXCHANGE_MOVES` table and nowhere else. Its timings are measurements (`performance.now`,
 * sub-millisecond), not a clock anything waits on.
 */
export class Exchange implements UpstreamHandler, Admittable {
  #state: ExchangeState = 'reading';
  readonly #res: ServerResponse;
  #opts: ServingProxyOptions;
  readonly #start: number;
  readonly #requestId: string;
  #req: IncomingMessage | undefined;
  #route: ForwardRoute | undefined;
  #upstreamHeaders: readonly string[] = NO_HEADERS;
  #body: ForwardedBody = NO_BODY;
  #rid: string | string[] | undefined;

  /** The replica that holds the request (counted in its in-flight figures until the exchange is done). */
  #target: ProxyTarget | undefined;
  #tried: Set<string> | undefined;
  #attempts = 0;
  #controller: UpstreamController | undefined;
  #status = 0;
  #respHeaders: IncomingHttpHeaders | undefined;
  #chunks: Buffer[] = [];
  /** A relayed stream's last two reads: where its final usage is (kept by reference, never copied). */
  #tail: Buffer | undefined;
  #tailPrev: Buffer | undefined;
  #answer: Buffer | undefined;
  /** An event stream whose weights the relay declares (its events rewritten as they pass). */
  #rewrite: OpenAIStreamVersions | undefined;
  #retries: string[] | undefined;
  /** Set while the request waits out a retry's backoff (the client leaving aborts it). */
  #backoff: AbortController | undefined;
  #rawSocket: Socket | undefined;
  #bytesDown = 0;
  #ttfb: number | undefined;
  #upstreamStartAt: number | undefined;
  #firstOutAt: number | undefined;
  #bodyAt: number | undefined;
  /** The admission gate whose slot this request holds. */
  #slot: AdmissionGate | undefined;

  constructor(res: ServerResponse, opts: ServingProxyOptions, start: number, requestId: string) {
    this.#res = res;
    this.#opts = opts;
    this.#start = start;
    this.#requestId = requestId;
    // Anonymous closures on purpose (see collectBody: tsx names each named closure with a defineProperty).
    res.on('close', () => this.#clientClosed());
  }

  /** The one place the state changes. An illegal move is a gateway bug: that request ends with a 500 (its
   * connection cut if bytes went out) instead of the process going down. False: the move was refused. */
  #move(move: ExchangeMove): boolean {
    const from = this.#state;
    if (canMoveExchange(from, move)) {
      this.#state = EXCHANGE_MOVES[move].to;
      return true;
    }
    if (move !== 'finish') this.#fault(`cannot ${move} while ${from}`);
    return false;
  }

  #fault(why: string): void {
    const err = new UisError({
      code: 'internal_error',
      message: `gateway bug: request ${this.#requestId} ${why}`,
    });
    if (this.#res.headersSent) this.#res.destroy(err);
    else sendError(this.#res, err, this.#requestId, this.#opts.errorBody);
    this.#finish('error', err.status, err);
    this.#controller?.abort(new ClientGoneError());
  }

  /** Starts forwarding `body` along `route`, with `inject` as its rid when it names none. */
  begin(req: IncomingMessage, body: ParsedBody, route: ForwardRoute, inject: string | undefined): void {
    this.#bodyAt = performance.now() - this.#start;
    if (this.#state === 'client_gone') {
      this.#finish('client_abort', 0, undefined);
      return;
    }
    this.#route = route;
    this.#req = req;
    if (route.owner !== undefined) this.#opts = ownedOptions(this.#opts, route.owner);
    this.#rid = body.fields.rid ?? inject;
    this.#body = forwardedBody(body, route.edit, inject);
    this.#upstreamHeaders = upstreamRequestHeaders(
      req.rawHeaders,
      this.#requestId,
      route.engineApiKey,
      route.traceparent,
      this.#opts.passHeaders,
    );
    const gate = this.#opts.admission;
    if (gate === undefined) this.#attempt(route.pick(undefined));
    else if (this.#move('queue')) gate.enter(this);
  }

  admitted(): void {
    this.#slot = this.#opts.admission;
    this.#attempt(this.#route!.pick(undefined));
  }

  turnedAway(err: UisError, retryAfterSeconds: number): void {
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
    if (this.#rid !== undefined)
      this.#opts.hooks?.onDispatch?.(this.#rid, target, this.#requestId, this.#route?.model);
  }

  #dispatch(): void {
    if (!this.#move('send')) return;
    this.#controller = undefined;
    try {
      this.#opts.pools.get(this.#target!.origin).dispatch(
        {
          path: this.#route!.path,
          headers: this.#upstreamHeaders,
          body: this.#body.bytes,
          bodyPrefix: this.#body.prefix,
        },
        this,
      );
    } catch (e) {
      this.#fail(asUisError(e));
    }
  }

  onRequestStart(controller: UpstreamController): void {
    this.#controller = controller;
    this.#upstreamStartAt = performance.now() - this.#start;
    if (this.#state === 'client_gone') controller.abort(new ClientGoneError());
  }

  onResponseStart(
    controller: UpstreamController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    framing: BodyFraming,
  ): void {
    this.#controller = controller;
    if (this.#state === 'client_gone') {
      controller.abort(new ClientGoneError());
      return;
    }
    this.#ttfb = performance.now() - this.#start;
    this.#status = statusCode;
    const type = headers['content-type'];
    const length = headers['content-length'];
    // Event streams, bodies of unknown length and large bodies are relayed as they come; a small sized body is
    // collected and sent in one write.
    const relayed =
      length === undefined ||
      Number(length) > MAX_BUFFERED_RESPONSE_BYTES ||
      (typeof type === 'string' && type.startsWith('text/event-stream'));
    if (!relayed) {
      if (this.#move('buffer')) this.#respHeaders = headers;
      return;
    }
    const res = this.#res;
    const rewrite =
      statusCode === 200 && typeof type === 'string' && type.startsWith('text/event-stream')
        ? this.#route!.versions?.stream?.(this.#target!)
        : undefined;
    this.#rewrite = rewrite;
    if (framing === 'chunked' && canRelayChunked(this.#req!, res) && controller.relayChunked()) {
      if (!this.#move('relay')) return;
      // The engine's chunks go out with their framing as they came (rewritten: one chunk per read, made by the
      // rewrite); node must not frame them again.
      rewrite?.reframe();
      const out = servedBy(clientResponseHeaders(headers, this.#requestId, false), this.#target);
      out.push('transfer-encoding', 'chunked');
      res.writeHead(statusCode, out);
      res.chunkedEncoding = false;
    } else {
      if (!this.#move('stream')) return;
      // A known length is kept (the bytes are relayed unchanged); otherwise node frames the stream itself.
      res.writeHead(
        statusCode,
        servedBy(
          clientResponseHeaders(headers, this.#requestId, length !== undefined && rewrite === undefined),
          this.#target,
        ),
      );
    }
    // The engine's first bytes usually come in the same read as its headers: they then leave in one write with
    // the headers (one syscall and one client wake-up less per request). Headers alone still go out this turn.
    queueMicrotask(() => this.#flushHeaders());
  }

  onResponseData(controller: UpstreamController, data: Buffer): void {
    this.#bytesDown += data.length;
    const state = this.#state;
    if (state === 'buffering') {
      this.#chunks.push(data);
      return;
    }
    if (!relaysStream(state)) return;
    const chunk = this.#rewrite === undefined ? data : this.#rewrite.push(data);
    if (chunk.length === 0) return;
    this.#tailPrev = this.#tail;
    this.#tail = chunk;
    let ok: boolean;
    const socket = this.#rawSocket;
    if (socket !== undefined) {
      ok = socket.write(chunk);
    } else {
      this.#firstOutAt ??= performance.now() - this.#start;
      ok = this.#res.write(chunk);
      // Once the head has left with the first bytes, a relayed chunked stream's bytes go straight to the client
      // socket: node's response has nothing left to add to them (~2.5 us less per event).
      if (state === 'relaying') this.#rawSocket = this.#res.socket ?? undefined;
    }
    if (!ok) {
      // The client reads slower than the engine writes: hold the engine socket until the client drains.
      controller.pause();
      (socket ?? this.#res).once('drain', () => controller.resume());
    }
  }

  onResponseEnd(): void {
    const res = this.#res;
    switch (this.#state) {
      case 'streaming':
      case 'relaying':
        res.end(this.#rewrite?.end());
        break;
      case 'buffering':
        if (!res.destroyed) {
          let body =
            this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks, this.#bytesDown);
          const versions = this.#status === 200 ? this.#route?.versions : undefined;
          if (versions === undefined) {
            res.writeHead(
              this.#status,
              servedBy(clientResponseHeaders(this.#respHeaders ?? {}, this.#requestId, true), this.#target),
            );
          } else {
            const target = this.#target!;
            const read = readAnswerVersions(body);
            const declared = declarationOf(read, target.weightVersion ?? null, versions.earlier, target);
            const sent = body;
            // A release without spans that ran across in-place switches: the versions, not where they changed.
            if (read.spans === null && declared.earlier.length > 0) {
              const named = declaredVersions(declared);
              if (named.length > 1) body = withUnsplitVersions(body, read, named);
            }
            if (versions.openai && declared.weightVersion !== null)
              body = withFingerprint(body, declared.weightVersion);
            const out = clientResponseHeaders(this.#respHeaders ?? {}, this.#requestId, body === sent);
            out.push('x-uis-engine-id', target.id);
            declarationHeaders(declared, out);
            res.writeHead(this.#status, out);
          }
          this.#firstOutAt = performance.now() - this.#start;
          res.end(body);
          this.#answer = body;
        }
        break;
      case 'client_gone':
        this.#finish('client_abort', 0, undefined);
        return;
      default:
        return; // done (the exchange ended first), or an end with no answer head: the engine pool never does that
    }
    this.#finish('ok', this.#status, undefined);
  }

  onResponseError(_controller: UpstreamController, err: Error): void {
    const state = this.#state;
    if (state === 'done') return;
    if (state === 'client_gone' || err instanceof ClientGoneError) {
      this.#finish('client_abort', 0, undefined);
      return;
    }
    const code = errorCode(err);
    const target = this.#target!;
    if (relaysStream(state)) {
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
    const answered = state === 'buffering';
    const failure = engineFailure(err, code, target, answered);
    if (!answered && retryableCode(code) && this.#retry(target, failure)) return;
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
    if (!this.#move('retry')) return true;
    this.#opts.inFlight?.release(target.id);
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
    if (this.#firstOutAt === undefined && relaysStream(this.#state) && !this.#res.destroyed)
      this.#res.flushHeaders();
  }

  #clientClosed(): void {
    if (this.#res.writableFinished) return;
    switch (this.#state) {
      case 'done':
      case 'client_gone':
        return;
      case 'reading':
        this.#move('abandon'); // still reading the body or resolving: nothing upstream yet
        return;
      case 'queued':
        // Left while waiting for an admission slot: it never holds one.
        this.#opts.admission?.cancel(this);
        this.#finish('client_abort', 0, undefined);
        return;
      case 'waiting_retry':
        this.#backoff?.abort(); // the next engine never saw the request
        return;
      default: {
        const target = this.#target!;
        const controller = this.#controller;
        // Told before the call ends: ending it completes the request, whose model (the abort's metric label and
        // engine key) is forgotten then.
        if (this.#rid !== undefined)
          this.#opts.hooks?.onClientAbort?.(this.#rid, target, this.#requestId, this.#route?.model);
        // The engine pool ends the call at once (onResponseError); before it started, at its first event.
        if (controller === undefined) this.#move('abandon');
        else controller.abort(new ClientGoneError());
      }
    }
  }

  #finish(outcome: ForwardOutcome, status: number, error: UisError | undefined): void {
    const from = this.#state;
    if (!this.#move('finish')) return;
    if (this.#target !== undefined) this.#opts.inFlight?.release(this.#target.id);
    const slot = this.#slot;
    this.#slot = undefined;
    slot?.leave();
    const onComplete = this.#opts.hooks?.onComplete;
    if (onComplete === undefined) return;
    const streamed = relaysStream(from);
    onComplete({
      requestId: this.#requestId,
      model: this.#route?.model,
      rid: this.#rid,
      target: this.#target,
      status,
      outcome,
      error,
      attempts: this.#attempts,
      retries: this.#retries ?? NO_RETRIES,
      streamed,
      usage: outcome === 'ok' && this.#status < 400 ? this.#usage(streamed) : undefined,
      bytesUp: this.#body.prefix.length + this.#body.bytes.length,
      bytesDown: this.#bytesDown,
      bodyMs: this.#bodyAt,
      upstreamStartMs: this.#upstreamStartAt,
      ttfbMs: this.#ttfb,
      firstByteOutMs: this.#firstOutAt,
      totalMs: performance.now() - this.#start,
    });
  }

  #usage(streamed: boolean): TokenUsage | undefined {
    if (!streamed) return this.#answer === undefined ? undefined : usageOfBody(this.#answer);
    const tail = this.#tail;
    if (tail === undefined) return undefined;
    return usageOfStreamTail(this.#tailPrev === undefined ? tail : Buffer.concat([this.#tailPrev, tail]));
  }

  /** Ends a request refused before forwarding (bad body, unknown model...). */
  refuse(err: UisError): void {
    this.#fail(err);
  }
}
