import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { connect, isIP, type Socket } from 'node:net';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';
import {
  type BodyFraming,
  ChunkedScanner,
  ProtocolError,
  parseResponseHead,
  type ResponseHead,
  requestHead,
} from './http1.ts';

/**
 * The gateway's own HTTP/1.1 client for engine traffic: keep-alive sockets per engine origin, one request per
 * socket at a time, the request written in the same turn it is dispatched (one write for head and body), and
 * the response handed to a handler as it is read, with no stream objects in between. A chunked answer can be
 * relayed with its framing as it came (`relayChunked`), so an SSE event costs one read and one write.
 *
 * Why not undici: on a reused socket undici defers the request write by one `setImmediate`, so under load every
 * new request waits behind all the I/O of the current loop turn (p99 +11-16 ms in the streaming bench), and its
 * per-chunk path (wasm parser, handler wrappers) costs a few microseconds more than a relay needs.
 */

export type UpstreamErrorCode =
  | 'UPSTREAM_CONNECT_TIMEOUT'
  | 'UPSTREAM_HEADERS_TIMEOUT'
  | 'UPSTREAM_BODY_TIMEOUT'
  /** The engine closed the connection before its answer ended. */
  | 'UPSTREAM_CLOSED'
  /** The pool was closed, or the engine removed, while the request ran. */
  | 'UPSTREAM_DESTROYED';

export class UpstreamError extends Error {
  readonly code: UpstreamErrorCode;
  constructor(code: UpstreamErrorCode, message: string) {
    super(message);
    this.name = 'UpstreamError';
    this.code = code;
  }
}

/** Socket errors and our own codes that mean the engine never produced a response: worth one try elsewhere. */
export const UNREACHABLE_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'UPSTREAM_CONNECT_TIMEOUT',
  'UPSTREAM_CLOSED',
  'UPSTREAM_DESTROYED',
]);
export const TIMEOUT_CODES: ReadonlySet<string> = new Set([
  'UPSTREAM_HEADERS_TIMEOUT',
  'UPSTREAM_BODY_TIMEOUT',
]);

/** The `code` of an error, when it has a string one (socket errors, UpstreamError, ProtocolError). */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

export interface UpstreamRequest {
  path: string;
  method?: string;
  /** Flat `[name, value, ...]`; `host` and `content-length` are set by the pool. */
  headers: readonly string[];
  body: Buffer;
}

/** What a handler can do with its request while it runs. */
export interface UpstreamController {
  /** Stops the request: the socket is closed (never reused) and `onResponseError(reason)` is called. */
  abort(reason: Error): void;
  /** Stops reading the engine's answer (TCP backpressure reaches the engine); the body timeout waits too. */
  pause(): void;
  resume(): void;
  /**
   * Only in `onResponseStart` of a chunked answer: from now on `onResponseData` gets the body's bytes as they
   * came, chunk framing and last chunk included, ready for an HTTP/1.1 client. Returns false (and changes
   * nothing) when the answer is not chunked.
   */
  relayChunked(): boolean;
}

export interface UpstreamHandler {
  /** The request was written to a socket (again, if a stale keep-alive socket made the pool resend it). */
  onRequestStart?(controller: UpstreamController): void;
  onResponseStart(
    controller: UpstreamController,
    status: number,
    headers: IncomingHttpHeaders,
    framing: BodyFraming,
  ): void;
  onResponseData(controller: UpstreamController, chunk: Buffer): void;
  onResponseEnd(controller: UpstreamController): void;
  /** Called at most once, and never after onResponseEnd. */
  onResponseError(controller: UpstreamController, err: Error): void;
}

export interface EnginePoolOptions {
  /** Max sockets to the origin; requests beyond them wait in order. */
  connections: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  connectTimeoutMs: number;
  /** Idle time after which a kept-alive socket is closed, unless the engine announced its own timeout. */
  keepAliveTimeoutMs: number;
  /** Upper bound for an engine-announced keep-alive timeout. */
  keepAliveMaxTimeoutMs: number;
  /** TLS options for https engines (e.g. `ca` of a private CA); verification stays on unless turned off here. */
  tls?: Pick<ConnectionOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized'>;
}

/** Per-origin connection figures, as the gateway's diagnostics read them. */
export interface EnginePoolStats {
  connected: number;
  free: number;
  pending: number;
  queued: number;
  running: number;
}

/** Socket churn over all origins: steady serving opens none. */
export interface PoolChurn {
  connects: number;
  disconnects: number;
  lastDisconnect: string | undefined;
}

/** The coarse clock of timeouts: ticks of the pools' sweep, so reads only copy an integer. */
export interface SweepClock {
  tick: number;
  intervalMs: number;
}

const STATE_QUEUED = 0;
const STATE_CONNECTING = 1;
const STATE_HEAD = 2;
const STATE_BODY = 3;
const STATE_DONE = 4;

/** Bodies up to this size are copied behind the head for one write; larger ones go as a second buffer. */
const COPY_BODY_BYTES = 16 * 1024;

/** One dispatched request, from the queue to its end. */
class Call implements UpstreamController {
  state = STATE_QUEUED;
  conn: Connection | undefined;
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
    readonly pool: EnginePool,
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
    let head: string;
    try {
      head = requestHead(req.method ?? 'POST', req.path, this.pool.host, req.headers, req.body.length);
    } catch (e) {
      this.fail(e as Error);
      return;
    }
    this.state = STATE_HEAD;
    this.gotBytes = false;
    this.sentTick = this.pool.clock.tick;
    const socket = conn.socket;
    const body = req.body;
    if (body.length <= COPY_BODY_BYTES) {
      const headLen = Buffer.byteLength(head, 'latin1');
      const out = Buffer.allocUnsafe(headLen + body.length);
      out.write(head, 0, 'latin1');
      body.copy(out, headLen);
      socket.write(out);
    } else {
      socket.cork();
      socket.write(head, 'latin1');
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
        head = parseResponseHead(data, this.req.method ?? 'POST');
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
  onSocketClosed(conn: Connection, err: Error | undefined): void {
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

/** Every engine socket reads into this one buffer (reads run one at a time on the event loop). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** One socket to an engine. */
class Connection {
  readonly socket: Socket;
  call: Call | undefined;
  connected = false;
  /** Carried a request before: may have been closed by the engine while idle. */
  reused = false;
  idleTick = 0;
  connectTick: number;
  idleLimitMs: number;
  closed = false;
  #error: Error | undefined;

  constructor(
    readonly pool: EnginePool,
    call: Call,
  ) {
    this.call = call;
    this.connectTick = pool.clock.tick;
    this.idleLimitMs = pool.options.keepAliveTimeoutMs;
    const onData = (buf: Buffer) => {
      const c = this.call;
      if (c !== undefined) c.onData(buf);
      else this.destroy(); // bytes nobody asked for: the connection's framing is lost
    };
    let socket: Socket;
    if (pool.secure) {
      // An https engine: TLS verified against the system CAs (plus NODE_EXTRA_CA_CERTS) or the pools' `tls.ca`.
      socket = tlsConnect({
        host: pool.hostname,
        port: pool.port,
        ...(isIP(pool.hostname) === 0 ? { servername: pool.hostname } : {}),
        ...pool.options.tls,
      });
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 60_000);
      socket.on('data', onData);
    } else {
      socket = connect({
        host: pool.hostname,
        port: pool.port,
        noDelay: true,
        keepAlive: true,
        keepAliveInitialDelay: 60_000,
        // Reads land in one shared buffer and are copied out at once (the relay's write may outlive this turn):
        // small reads then come from node's buffer pool, so an SSE event costs no ArrayBuffer of its own and no
        // stream machinery (~2.5 us less per event than 'data' events).
        onread: {
          buffer: READ_BUFFER,
          callback: (n: number, buf: Uint8Array) => {
            const data = Buffer.allocUnsafe(n);
            data.set(buf.subarray(0, n));
            onData(data);
            return true;
          },
        },
      });
    }
    this.socket = socket;
    socket.on(pool.secure ? 'secureConnect' : 'connect', () => {
      this.connected = true;
      pool.churn.connects++;
      const c = this.call;
      if (c !== undefined) c.send();
    });
    socket.on('error', (err) => {
      this.#error = err;
    });
    socket.on('close', () => this.#closed());
  }

  noteKeepAlive(hintS: number | undefined): void {
    if (hintS === undefined) return;
    // Leave a second's margin so we close first rather than race the engine's close.
    this.idleLimitMs = Math.min(Math.max(0, hintS * 1000 - 1000), this.pool.options.keepAliveMaxTimeoutMs);
  }

  /** The call on this socket ended normally. */
  finish(keepAlive: boolean): void {
    if (!keepAlive || this.closed || this.idleLimitMs === 0) {
      this.destroy(); // while `call` is still set, so the pool counts it out of the running ones
      this.call = undefined;
      return;
    }
    this.call = undefined;
    this.reused = true;
    this.pool.release(this);
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    this.pool.forget(this);
  }

  #closed(): void {
    const err = this.#error;
    if (this.connected) {
      this.pool.churn.disconnects++;
      this.pool.churn.lastDisconnect =
        err === undefined ? 'closed' : `${errorCode(err) ?? ''} ${err.message}`;
    }
    const wasClosed = this.closed;
    this.closed = true;
    if (!wasClosed) this.pool.forget(this);
    const c = this.call;
    this.call = undefined;
    if (c !== undefined && !c.ended) c.onSocketClosed(this, err);
  }
}

/** Keep-alive sockets to one engine origin (`http://host:port`). */
export class EnginePool {
  readonly host: string;
  readonly hostname: string;
  readonly port: number;
  readonly secure: boolean;
  readonly #conns = new Set<Connection>();
  /** Idle sockets, most recently used last (reused first: they are the warmest). */
  readonly #idle: Connection[] = [];
  readonly #queue: Call[] = [];
  #running = 0;
  #closed = false;
  /** Sweep tick of the last dispatch: an origin unused for long (an engine gone for good) is dropped. */
  lastUsedTick: number;

  constructor(
    origin: string,
    readonly options: EnginePoolOptions,
    readonly clock: SweepClock,
    readonly churn: PoolChurn,
  ) {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new TypeError(`engine origin must be http(s)://host:port, got ${origin}`);
    this.secure = url.protocol === 'https:';
    this.host = url.host;
    this.hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === '' ? (this.secure ? 443 : 80) : Number(url.port);
    this.lastUsedTick = clock.tick;
  }

  /** Starts a request; everything that happens to it reaches `handler`. */
  dispatch(req: UpstreamRequest, handler: UpstreamHandler): UpstreamController {
    this.lastUsedTick = this.clock.tick;
    const call = new Call(this, req, handler);
    if (this.#closed) {
      call.fail(new UpstreamError('UPSTREAM_DESTROYED', 'engine pool is closed'));
      return call;
    }
    this.#place(call, false);
    return call;
  }

  /** A buffered request for control-plane calls (e.g. the GenRM adapter): the whole answer, or a rejection. */
  request(
    req: UpstreamRequest,
    signal?: AbortSignal,
  ): Promise<{ statusCode: number; headers: IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      let status = 0;
      let headers: IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      const onAbort = () =>
        controller.abort(signal!.reason instanceof Error ? signal!.reason : new Error('aborted'));
      const controller = this.dispatch(req, {
        onResponseStart(_c, s, h) {
          status = s;
          headers = h;
        },
        onResponseData(_c, chunk) {
          chunks.push(chunk);
        },
        onResponseEnd() {
          signal?.removeEventListener('abort', onAbort);
          resolve({ statusCode: status, headers, body: Buffer.concat(chunks) });
        },
        onResponseError(_c, err) {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      });
      if (signal !== undefined) {
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
    });
  }

  #place(call: Call, fresh: boolean): void {
    const idle = fresh ? undefined : this.#idle.pop();
    if (idle !== undefined) {
      this.#assign(idle, call);
      call.send();
      return;
    }
    if (this.#conns.size >= this.options.connections) {
      this.#queue.push(call);
      return;
    }
    call.state = STATE_CONNECTING;
    this.#running++;
    const conn = new Connection(this, call);
    call.conn = conn;
    this.#conns.add(conn);
  }

  #assign(conn: Connection, call: Call): void {
    conn.call = call;
    call.conn = conn;
    this.#running++;
  }

  /** Sends a call again on a new socket (its first socket was a stale keep-alive one). */
  resend(call: Call): void {
    if (this.#closed) {
      call.fail(new UpstreamError('UPSTREAM_DESTROYED', 'engine pool is closed'));
      return;
    }
    call.state = STATE_QUEUED;
    this.#place(call, true);
  }

  unqueue(call: Call): void {
    const i = this.#queue.indexOf(call);
    if (i !== -1) this.#queue.splice(i, 1);
  }

  /** A socket finished its call and stays open: next waiting call, or idle. */
  release(conn: Connection): void {
    this.#running--;
    const next = this.#queue.shift();
    if (next !== undefined) {
      this.#assign(conn, next);
      next.send();
      return;
    }
    conn.idleTick = this.clock.tick;
    this.#idle.push(conn);
  }

  /** A socket closed (or was destroyed): drop it everywhere; a waiting call may now open a new one. */
  forget(conn: Connection): void {
    if (!this.#conns.delete(conn)) return;
    if (conn.call !== undefined) this.#running--;
    else {
      const i = this.#idle.indexOf(conn);
      if (i !== -1) this.#idle.splice(i, 1);
    }
    const next = this.#closed ? undefined : this.#queue.shift();
    if (next !== undefined) this.#place(next, true);
  }

  /** Timeouts and idle expiry, called by the sweep. Times are counted in whole ticks after the one in which
   * they started, so a timeout may fire up to one tick late, never early. */
  sweep(): void {
    const tick = this.clock.tick - 1;
    const intervalMs = this.clock.intervalMs;
    const o = this.options;
    for (const conn of this.#conns) {
      const call = conn.call;
      if (call === undefined) {
        if ((tick - conn.idleTick) * intervalMs >= conn.idleLimitMs) conn.destroy();
        continue;
      }
      if (call.state === STATE_CONNECTING && (tick - conn.connectTick) * intervalMs >= o.connectTimeoutMs)
        call.fail(
          new UpstreamError('UPSTREAM_CONNECT_TIMEOUT', `connect timeout after ${o.connectTimeoutMs} ms`),
        );
      else if (call.state === STATE_HEAD && (tick - call.sentTick) * intervalMs >= o.headersTimeoutMs)
        call.fail(
          new UpstreamError(
            'UPSTREAM_HEADERS_TIMEOUT',
            `no response headers within ${o.headersTimeoutMs} ms`,
          ),
        );
      else if (
        call.state === STATE_BODY &&
        !call.paused &&
        (tick - call.lastTick) * intervalMs >= o.bodyTimeoutMs
      )
        call.fail(new UpstreamError('UPSTREAM_BODY_TIMEOUT', `no response bytes for ${o.bodyTimeoutMs} ms`));
    }
  }

  stats(): EnginePoolStats {
    let connected = 0;
    for (const c of this.#conns) if (c.connected) connected++;
    return {
      connected,
      free: this.#idle.length,
      pending: this.#queue.length,
      queued: this.#queue.length,
      running: this.#running,
    };
  }

  get size(): number {
    return this.#conns.size + this.#queue.length;
  }

  /** Closes every socket (resolves once all are closed); running and waiting requests fail with
   * UPSTREAM_DESTROYED. */
  async close(): Promise<void> {
    this.#closed = true;
    const err = new UpstreamError('UPSTREAM_DESTROYED', 'engine pool closed');
    for (const call of this.#queue.splice(0)) call.fail(err);
    const closing: Promise<unknown>[] = [];
    for (const conn of [...this.#conns]) {
      if (!conn.socket.closed) closing.push(once(conn.socket, 'close'));
      const call = conn.call;
      if (call !== undefined) call.fail(err);
      else conn.destroy();
    }
    await Promise.all(closing);
  }
}
