import { connect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Call } from './call.ts';
import type { EnginePoolOptions, PoolChurn, SweepClock } from './pool-types.ts';
import { errorCode } from './upstream-error.ts';

/** A socket's own state: connecting (plain or TLS), reading, keep-alive limits, closing and churn figures. */

/** Every engine socket reads into this one buffer (reads run one at a time on the event loop). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** What a connection needs of its pool (an `EnginePool`). */
export interface ConnectionPool {
  readonly hostname: string;
  readonly port: number;
  readonly secure: boolean;
  readonly options: EnginePoolOptions;
  readonly clock: SweepClock;
  readonly churn: PoolChurn;
  /** The socket is idle and kept alive. */
  release(conn: Connection): void;
  /** The socket closed. */
  forget(conn: Connection): void;
}

/** One socket to an engine. */
export class Connection {
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
    readonly pool: ConnectionPool,
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
