import type { Socket } from 'node:net';
import type { HeadMemo } from './head-memo.ts';
import { type BodyFraming, ChunkedScanner, ProtocolError, type ResponseHead, requestHead } from './http1.ts';
import type { SweepClock, UpstreamController, UpstreamHandler, UpstreamRequest } from './pool-types.ts';
import { UpstreamError } from './upstream-error.ts';

/**
 * A request's own state, from the queue to its end: writing it, reading the answer's head and body with their
 * framing, and handing both to the handler. The socket it runs on is a Connection; the pool places it.
 */

export const STATE_QUEUED = 0;
export const STATE_CONNECTING = 1;
export const STATE_HEAD = 2;
export const STATE_BODY = 3;
export const STATE_DONE = 4;

/** Bodies up to this size are copied behind the head for one write; larger ones go as a second buffer. */
const COPY_BODY_BYTES = 16 * 1024;

/** The socket a call runs on, as the call uses it (a `Connection`). */
export interface CallConnection {
  readonly socket: Socket;
  /** Carried a request before: may have been closed by the engine while idle. */
  readonly reused: boolean;
  noteKeepAlive(hintS: number | undefined): void;
  /** The call on this socket ended normally. */
  finish(keepAlive: boolean): void;
  destroy(): void;
}

/** What a call needs of its pool (an `EnginePool`). */
export interface CallPool {
  /** The engine's `Host` header value. */
  readonly host: string;
  readonly clock: SweepClock;
  /** The engine's answer heads seen before (they repeat). */
  readonly heads: HeadMemo;
  /** Takes a call that fails while queued out of the queue. */
  unqueue(call: Call): void;
  /** Sends a call once more on a fresh socket (its reused socket closed before any answer). */
  resend(call: Call): void;
}

/** One dispatched request, from the queue to its end. */
export class Call implements UpstreamController {
  state = STATE_QUEUED;
  conn: CallConnection | undefined;
  /** Set when a stale keep-alive socket already made the pool resend this request once. */
  resent = false;
  /** Response bytes seen on the current socket (a resend is only safe before any). */
  gotBytes = false;
  framing: BodyFraming = 'none';
  keepAlive = false;
  remaining = 0;
  scanner: ChunkedScanner | undefined;
  relayRaw = false;
  inResponseStart = false;
  paused = false;
  pending: Buffer | undefined;
  sentTick = 0;
  lastTick = 0;
  /** Decoded chunk data to the handler; made only for an answer that is decoded (a relayed one needs none). */
  #onSlice: ((slice: Buffer) => void) | undefined;

  constructor(
    readonly pool: CallPool,
    readonly req: UpstreamRequest,
    readonly handler: UpstreamHandler,
  ) {}

  get ended(): boolean {
    return this.state === STATE_DONE;
  }

  abort(reason: Error): void {
    if (this.state === STATE_DONE) return;
    this.fail(reason);
  }

  pause(): void {
    if (this.paused || this.state === STATE_DONE) return;
    this.paused = true;
    this.conn?.socket.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.lastTick = this.pool.clock.tick;
    if (this.state !== STATE_DONE) this.conn?.socket.resume();
  }

  relayChunked(): boolean {
    if (!this.inResponseStart || this.framing !== 'chunked') return false;
    this.relayRaw = true;
    return true;
  }

  /** Writes the request on its (connected) socket. */
  send(): void {
    const conn = this.conn!;
    const req = this.req;
    const body = req.body;
    const prefix = req.bodyPrefix ?? '';
    let head: string;
    try {
      head = requestHead(
        req.method ?? 'POST',
        req.path,
        this.pool.host,
        req.headers,
        prefix.length + body.length,
      );
    } catch (e) {
      this.fail(e as Error);
      return;
    }
    this.state = STATE_HEAD;
    this.gotBytes = false;
    this.sentTick = this.pool.clock.tick;
    const socket = conn.socket;
    if (body.length <= COPY_BODY_BYTES) {
      const text = prefix === '' ? head : head + prefix;
      const out = Buffer.allocUnsafe(text.length + body.length);
      out.write(text, 0, 'latin1');
      body.copy(out, text.length);
      socket.write(out);
    } else {
      socket.cork();
      socket.write(prefix === '' ? head : head + prefix, 'latin1');
      socket.write(body);
      socket.uncork();
    }
    this.handler.onRequestStart?.(this);
  }

  /** Bytes from the socket while this call owns it. */
  onData(buf: Buffer): void {
    this.gotBytes = true;
    if (this.state === STATE_HEAD) {
      this.readHead(buf);
      return;
    }
    if (this.state === STATE_BODY) this.readBody(buf);
  }

  readHead(buf: Buffer): void {
    let data = this.pending === undefined ? buf : Buffer.concat([this.pending, buf]);
    this.pending = undefined;
    let head: ResponseHead | undefined;
    for (;;) {
      try {
        head = this.pool.heads.parse(data, this.req.method ?? 'POST');
      } catch (e) {
        this.fail(e as Error);
        return;
      }
      if (head === undefined) {
        this.pending = data;
        return;
      }
      if (head.status >= 200) break;
      if (head.status === 101) {
        this.fail(new ProtocolError('engine switched protocols'));
        return;
      }
      // 1xx informational: the real answer follows.
      data = data.subarray(head.end);
    }
    this.framing = head.framing;
    this.keepAlive = head.keepAlive;
    this.remaining = head.contentLength;
    this.conn!.noteKeepAlive(head.keepAliveHintS);
    if (head.framing === 'chunked') this.scanner = new ChunkedScanner();
    this.state = STATE_BODY;
    this.lastTick = this.pool.clock.tick;
    this.inResponseStart = true;
    this.handler.onResponseStart(this, head.status, head.headers, head.framing);
    this.inResponseStart = false;
    if (this.state === STATE_DONE) return;
    const rest = data.subarray(head.end);
    if (head.framing === 'none') {
      if (rest.length > 0) this.keepAlive = false;
      this.complete();
      return;
    }
    if (rest.length > 0) this.readBody(rest);
  }

  readBody(buf: Buffer): void {
    this.lastTick = this.pool.clock.tick;
    switch (this.framing) {
      case 'chunked': {
        const scanner = this.scanner!;
        if (!this.relayRaw) this.#onSlice ??= (slice) => this.deliver(slice);
        let end: number;
        try {
          end = this.relayRaw ? scanner.scan(buf) : scanner.scan(buf, 0, this.#onSlice);
        } catch (e) {
          this.fail(e as Error);
          return;
        }
        if (this.state === STATE_DONE) return;
        if (this.relayRaw) this.deliver(end === -1 || end === buf.length ? buf : buf.subarray(0, end));
        if (end === -1 || this.state === STATE_DONE) return;
        if (end < buf.length) this.keepAlive = false;
        this.complete();
        return;
      }
      case 'length': {
        const take = Math.min(this.remaining, buf.length);
        this.remaining -= take;
        this.deliver(take === buf.length ? buf : buf.subarray(0, take));
        if (this.remaining > 0 || this.state === STATE_DONE) return;
        if (take < buf.length) this.keepAlive = false;
        this.complete();
        return;
      }
      default:
        this.deliver(buf);
    }
  }

  deliver(chunk: Buffer): void {
    if (chunk.length === 0 || this.state === STATE_DONE) return;
    this.handler.onResponseData(this, chunk);
  }

  /** The answer ended normally: the socket goes back to the pool (or closes) before the handler hears of it. */
  complete(): void {
    this.state = STATE_DONE;
    const conn = this.conn;
    this.conn = undefined;
    if (this.paused) {
      // The end came in the read that made the handler pause: the socket itself is free again.
      this.paused = false;
      conn?.socket.resume();
    }
    conn?.finish(this.keepAlive);
    this.handler.onResponseEnd(this);
  }

  fail(err: Error): void {
    if (this.state === STATE_DONE) return;
    const queued = this.state === STATE_QUEUED;
    this.state = STATE_DONE;
    if (queued) this.pool.unqueue(this);
    const conn = this.conn;
    this.conn = undefined;
    conn?.destroy();
    this.handler.onResponseError(this, err);
  }

  /** The socket closed under this call. */
  onSocketClosed(conn: CallConnection, err: Error | undefined): void {
    this.conn = undefined;
    if (this.state === STATE_BODY && this.framing === 'close' && err === undefined) {
      this.state = STATE_DONE;
      this.handler.onResponseEnd(this);
      return;
    }
    // A kept-alive socket the engine closed as we reused it (its idle timeout raced our request): nothing of the
    // request was read, so send it once more on a fresh socket to the same engine.
    if (this.state === STATE_HEAD && conn.reused && !this.gotBytes && !this.resent) {
      this.resent = true;
      this.pool.resend(this);
      return;
    }
    this.fail(
      err ??
        new UpstreamError(
          'UPSTREAM_CLOSED',
          `engine closed the connection ${this.state === STATE_BODY ? 'before its answer ended' : 'before answering'}`,
        ),
    );
  }
}
