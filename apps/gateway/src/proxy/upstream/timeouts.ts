import { type Call, STATE_BODY, STATE_CONNECTING, STATE_HEAD } from './call.ts';
import type { Connection } from './connection.ts';
import type { EnginePoolOptions, SweepClock } from './pool-types.ts';
import { UpstreamError } from './upstream-error.ts';

/**
 * Timeouts and idle expiry of one pool's sockets, called by the sweep. Times are counted in whole ticks after the
 * one in which they started, so a timeout may fire up to one tick late, never early. No timer per request: the
 * hot path only copies the tick into the call or connection.
 */
export function sweepTimeouts(conns: Iterable<Connection>, clock: SweepClock, o: EnginePoolOptions): void {
  const tick = clock.tick - 1;
  const intervalMs = clock.intervalMs;
  for (const conn of conns) {
    const call: Call | undefined = conn.call;
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
        new UpstreamError('UPSTREAM_HEADERS_TIMEOUT', `no response headers within ${o.headersTimeoutMs} ms`),
      );
    else if (
      call.state === STATE_BODY &&
      !call.paused &&
      (tick - call.lastTick) * intervalMs >= o.bodyTimeoutMs
    )
      call.fail(new UpstreamError('UPSTREAM_BODY_TIMEOUT', `no response bytes for ${o.bodyTimeoutMs} ms`));
  }
}
