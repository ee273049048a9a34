import { Pool } from 'undici';

/** Connection settings for every engine origin. Generations can run for an hour, and a non-streaming one sends
 * its headers only at the end, so both timeouts default to two hours; connecting must be quick. */
export interface UpstreamPoolOptions {
  /** Max sockets per engine origin (each carries one request at a time: pipelining 1). */
  connections?: number;
  /** Time allowed until the engine's response headers arrive. */
  headersTimeoutMs?: number;
  /** Max gap between two body chunks of the engine's response. */
  bodyTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** How long an idle keep-alive socket is kept. */
  keepAliveTimeoutMs?: number;
}

export const DEFAULT_UPSTREAM_POOL_OPTIONS: Required<UpstreamPoolOptions> = {
  connections: 4096,
  headersTimeoutMs: 2 * 60 * 60 * 1000,
  bodyTimeoutMs: 2 * 60 * 60 * 1000,
  connectTimeoutMs: 5_000,
  keepAliveTimeoutMs: 60_000,
};

/** One keep-alive undici Pool per engine origin (`http://host:port`), created on first use. */
export class UpstreamPools {
  readonly options: Required<UpstreamPoolOptions>;
  readonly #pools = new Map<string, Pool>();
  /** Sockets opened and closed since start, over all origins: steady serving should open none. */
  readonly churn = { connects: 0, disconnects: 0, lastDisconnect: undefined as string | undefined };

  constructor(options: UpstreamPoolOptions = {}) {
    this.options = { ...DEFAULT_UPSTREAM_POOL_OPTIONS, ...options };
  }

  get(origin: string): Pool {
    let pool = this.#pools.get(origin);
    if (pool === undefined) {
      const o = this.options;
      pool = new Pool(origin, {
        connections: o.connections,
        pipelining: 1,
        headersTimeout: o.headersTimeoutMs,
        bodyTimeout: o.bodyTimeoutMs,
        connectTimeout: o.connectTimeoutMs,
        keepAliveTimeout: o.keepAliveTimeoutMs,
        keepAliveMaxTimeout: Math.max(o.keepAliveTimeoutMs, 600_000),
      });
      pool.on('connect', () => {
        this.churn.connects++;
      });
      pool.on('disconnect', (_origin, _targets, err) => {
        this.churn.disconnects++;
        this.churn.lastDisconnect = `${(err as { code?: string }).code ?? ''} ${err.message}`;
      });
      this.#pools.set(origin, pool);
    }
    return pool;
  }

  /** Connection and queue figures per origin (undici PoolStats): how many sockets, how many requests wait. */
  stats(): Record<
    string,
    { connected: number; free: number; pending: number; queued: number; running: number }
  > {
    const out: Record<
      string,
      { connected: number; free: number; pending: number; queued: number; running: number }
    > = {};
    for (const [origin, pool] of this.#pools) {
      const s = pool.stats;
      out[origin] = {
        connected: s.connected,
        free: s.free,
        pending: s.pending,
        queued: s.queued,
        running: s.running,
      };
    }
    return out;
  }

  /** Drops an engine's pool (e.g. after it was unregistered); its in-flight requests fail. */
  async remove(origin: string): Promise<void> {
    const pool = this.#pools.get(origin);
    if (pool === undefined) return;
    this.#pools.delete(origin);
    await pool.destroy();
  }

  /** Closes every socket now; in-flight requests fail. */
  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((p) => p.destroy()));
  }
}
