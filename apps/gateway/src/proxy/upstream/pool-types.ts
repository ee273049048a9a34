import type { IncomingHttpHeaders } from 'node:http';
import type { ConnectionOptions } from 'node:tls';
import type { BodyFraming } from './http1.ts';

/** What the engine wire client takes and gives: requests, the handler of their answers, options and figures. */

export interface UpstreamRequest {
  path: string;
  method?: string;
  /** Flat `[name, value, ...]`; `host` and `content-length` are set by the pool. */
  headers: readonly string[];
  body: Buffer;
  /** Latin-1 text the body starts with, written before `body` and counted in its length (an injected rid spliced
   * in without copying the client's bytes into a new buffer first). */
  bodyPrefix?: string | undefined;
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
