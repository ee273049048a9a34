import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { Call, STATE_CONNECTING, STATE_QUEUED } from './call.ts';
import { Connection } from './connection.ts';
import { HeadMemo } from './head-memo.ts';
import type {
  EnginePoolOptions,
  EnginePoolStats,
  PoolChurn,
  SweepClock,
  UpstreamController,
  UpstreamHandler,
  UpstreamRequest,
} from './pool-types.ts';
import { sweepTimeouts } from './timeouts.ts';
import { UpstreamError } from './upstream-error.ts';

export * from './pool-types.ts';
export * from './upstream-error.ts';

/**
 * The gateway's own HTTP/1.1 client for engine traffic: keep-alive sockets per engine origin, one request per
 * socket at a time, the request written in the same turn it is dispatched (one write for head and body), and
 * the response handed to a handler as it is read, with no stream objects in between. A chunked answer can be
 * relayed with its framing as it came (`relayChunked`), so an SSE event costs one read and one write.
 *
 * Why not undici: on a reused socket undici defers the request write by one `setImmediate`, so under load every
 * new request waits behind all the I/O of the current loop turn (p99 +11-16 ms in the streaming bench), and its
 * per-chunk path (wasm parser, handler wrappers) costs a few microseconds more than a relay needs.
 *
 * The parts, each owning its state: `call.ts` (one request: writing it, framing its answer), `connection.ts`
 * (one socket: connect, TLS, keep-alive, close), `timeouts.ts` (the sweep's timeouts and idle expiry), and this
 * pool (the origin's sockets, idle list and wait queue).
 */

/** Keep-alive sockets to one engine origin (`http://host:port`). */
export class EnginePool {
  readonly host: string;
  readonly hostname: string;
  readonly port: number;
  readonly secure: boolean;
  readonly heads = new HeadMemo();
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

  /** A buffered request for control-plane calls (e.g. the GenRM adapter): the whole answer, or a rejection.
   * `onResponseStart` tells when the engine's answer began (a failure after it is not worth a retry). */
  request(
    req: UpstreamRequest,
    signal?: AbortSignal,
    onResponseStart?: (status: number) => void,
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
          onResponseStart?.(s);
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

  /** Timeouts and idle expiry, called by the sweep. */
  sweep(): void {
    sweepTimeouts(this.#conns, this.clock, this.options);
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
