import {
  EnginePool,
  type EnginePoolOptions,
  type EnginePoolStats,
  type PoolChurn,
  type SweepClock,
} from './upstream/engine-pool.ts';

/** Connection settings for every engine origin. Generations can run for an hour, and a non-streaming one sends
 * its headers only at the end, so both timeouts default to two hours; connecting must be quick. */
export interface UpstreamPoolOptions {
  /** Max sockets per engine origin (each carries one request at a time); requests beyond them wait in order. */
  connections?: number;
  /** Time allowed until the engine's response headers arrive. */
  headersTimeoutMs?: number;
  /** Max gap between two body reads of the engine's response (not counted while the client holds it back). */
  bodyTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** How long an idle keep-alive socket is kept when the engine does not announce its own timeout. SGLang's
   * uvicorn closes idle connections after 5 s without saying so, hence 4 s. */
  keepAliveTimeoutMs?: number;
  /** Cap on an engine-announced keep-alive timeout (`Keep-Alive: timeout=N`, kept minus one second). */
  keepAliveMaxTimeoutMs?: number;
  /** TLS options for https engines (e.g. `ca` of a private CA). */
  tls?: EnginePoolOptions['tls'];
  /** An engine origin with no socket and no request for this long is forgotten (engines restarted elsewhere or
   * removed would otherwise pile up for the life of the gateway). */
  originIdleMs?: number;
}

export const DEFAULT_UPSTREAM_POOL_OPTIONS: Required<Omit<UpstreamPoolOptions, 'tls'>> = {
  connections: 4096,
  headersTimeoutMs: 2 * 60 * 60 * 1000,
  bodyTimeoutMs: 2 * 60 * 60 * 1000,
  connectTimeoutMs: 5_000,
  keepAliveTimeoutMs: 4_000,
  keepAliveMaxTimeoutMs: 600_000,
  originIdleMs: 10 * 60 * 1000,
};

/**
 * One keep-alive EnginePool per engine origin (`http://host:port`), created on first use, and the one coarse
 * timer that enforces their timeouts (a tick of at most a second; finer when a timeout is short).
 */
export class UpstreamPools {
  readonly options: Required<Omit<UpstreamPoolOptions, 'tls'>> & Pick<UpstreamPoolOptions, 'tls'>;
  readonly #pools = new Map<string, EnginePool>();
  /** Sockets opened and closed since start, over all origins: steady serving should open none. */
  readonly churn: PoolChurn = { connects: 0, disconnects: 0, lastDisconnect: undefined };
  readonly #clock: SweepClock;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: UpstreamPoolOptions = {}) {
    this.options = { ...DEFAULT_UPSTREAM_POOL_OPTIONS, ...options };
    const o = this.options;
    const shortest = Math.min(
      o.headersTimeoutMs,
      o.bodyTimeoutMs,
      o.connectTimeoutMs,
      o.keepAliveTimeoutMs,
      o.originIdleMs,
    );
    this.#clock = { tick: 0, intervalMs: Math.min(1000, Math.max(10, Math.floor(shortest / 4))) };
  }

  get(origin: string): EnginePool {
    let pool = this.#pools.get(origin);
    if (pool === undefined) {
      pool = new EnginePool(origin, this.options, this.#clock, this.churn);
      this.#pools.set(origin, pool);
      if (this.#timer === undefined) {
        this.#timer = setInterval(() => this.#sweep(), this.#clock.intervalMs);
        this.#timer.unref();
      }
    }
    return pool;
  }

  #sweep(): void {
    const clock = this.#clock;
    clock.tick++;
    for (const [origin, pool] of this.#pools) {
      pool.sweep();
      if (pool.size === 0 && (clock.tick - pool.lastUsedTick) * clock.intervalMs >= this.options.originIdleMs)
        this.#pools.delete(origin);
    }
  }

  /** Engine origins with a pool now. */
  get origins(): string[] {
    return [...this.#pools.keys()];
  }

  /** Connection and queue figures per origin: how many sockets, how many requests wait. */
  stats(): Record<string, EnginePoolStats> {
    const out: Record<string, EnginePoolStats> = {};
    for (const [origin, pool] of this.#pools) out[origin] = pool.stats();
    return out;
  }

  /** Drops an engine's pool (e.g. after it was unregistered); its in-flight requests fail. */
  async remove(origin: string): Promise<void> {
    const pool = this.#pools.get(origin);
    if (pool === undefined) return;
    this.#pools.delete(origin);
    await pool.close();
  }

  /** Closes every socket now; in-flight requests fail. */
  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    await Promise.all(pools.map((p) => p.close()));
  }
}
