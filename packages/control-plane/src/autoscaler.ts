import type { EventLog, InferenceManager } from '@uis/manager';
import {
  type AutoscaleSpec,
  type Clock,
  configuredRoles,
  type Logger,
  type Role,
  type UisConfig,
} from '@uis/spec';
import type { ScaleOperations } from './scale-operations.ts';

/** When the built-in autoscaler scales one model: its config block (`autoscale:`), for one role's model. */
export type AutoscalePolicy = Omit<AutoscaleSpec, 'interval_s' | 'queue_time_p95_s'> & {
  role: Role;
  model: string;
  /** Without it the queue time is not a condition (the config block always has one: Relax's 5 s). */
  queue_time_p95_s?: number;
};

/** The policies of every model of `config` with an `autoscale` block, and how often to tick (the shortest
 * interval asked); null when no model asks. */
export function autoscalePolicies(
  config: UisConfig,
): { policies: AutoscalePolicy[]; intervalMs: number } | null {
  const policies: AutoscalePolicy[] = [];
  let interval = Number.POSITIVE_INFINITY;
  for (const { role, spec } of configuredRoles(config))
    for (const m of spec.models) {
      if (!m.autoscale) continue;
      const { interval_s, ...rest } = m.autoscale;
      policies.push({ ...rest, role, model: m.name });
      interval = Math.min(interval, interval_s * 1000);
    }
  return policies.length === 0 ? null : { policies, intervalMs: interval };
}

/** One engine's gauges, as its `/metrics` gives them; `queueTime` is the cumulative `sglang:queue_time_seconds`
 * histogram (upper bound -> count, summed over ranks) when the engine exports it. */
export interface EngineSample {
  queue: number;
  tokenUsage: number;
  /** `sglang:num_running_reqs`, summed over ranks (read, not decided on). */
  running?: number;
  queueTime?: ReadonlyMap<number, number>;
  /** P95 queue time (s) of the requests queued since the previous reading; Infinity past the last finite bucket. */
  queueTimeP95?: number | null;
}

export interface ScaleDecision {
  action: 'scale_out' | 'scale_in' | 'none';
  from: number;
  target: number;
  reason: string;
  metrics: { engines: number; queue: number; token_usage: number; queue_time_p95?: number | null };
}

/** The `q` quantile of a cumulative histogram (upper bound -> count, `+Inf` included), interpolated within its
 * bucket as Prometheus' histogram_quantile does; Infinity when it falls in the `+Inf` bucket, null when empty. */
export function histogramQuantile(buckets: ReadonlyMap<number, number>, q: number): number | null {
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const total = buckets.get(Number.POSITIVE_INFINITY) ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const b of bounds) {
    const c = buckets.get(b) ?? 0;
    if (c >= rank) {
      if (b === Number.POSITIVE_INFINITY) return Number.POSITIVE_INFINITY;
      return c === prevCount ? b : prevBound + ((b - prevBound) * (rank - prevCount)) / (c - prevCount);
    }
    prevBound = b;
    prevCount = c;
  }
  return null;
}

/** The counts `now` adds to `before` (the window between two readings); `now` itself after an engine restart. */
export function histogramDelta(
  now: ReadonlyMap<number, number>,
  before: ReadonlyMap<number, number> | undefined,
): Map<number, number> {
  const out = new Map<number, number>();
  const restarted = before === undefined || [...now].some(([b, c]) => c < (before.get(b) ?? 0));
  for (const [b, c] of now) out.set(b, restarted ? c : c - (before?.get(b) ?? 0));
  return out;
}

/** The decision for a model of `n` replicas from its engines' samples: pure (the time comes in). */
export function decideScale(
  p: AutoscalePolicy,
  n: number,
  samples: readonly EngineSample[],
  sinceLastActionS: number | null,
): ScaleDecision {
  const queue = samples.reduce((s, x) => s + x.queue, 0);
  const usage = samples.length === 0 ? 0 : samples.reduce((s, x) => s + x.tokenUsage, 0) / samples.length;
  const p95s = samples.flatMap((x) => (typeof x.queueTimeP95 === 'number' ? [x.queueTimeP95] : []));
  // The slowest engine's queue: Relax takes the maximum over engines too.
  const p95 = p95s.length === 0 ? null : Math.max(...p95s);
  const metrics = {
    engines: samples.length,
    queue,
    token_usage: Number(usage.toFixed(4)),
    ...(p.queue_time_p95_s === undefined
      ? {}
      : { queue_time_p95: p95 === null ? null : Number(p95.toFixed(3)) }),
  };
  const none = (reason: string): ScaleDecision => ({ action: 'none', from: n, target: n, reason, metrics });
  if (samples.length < n)
    return none(`metrics from ${samples.length} of ${n} replicas: no decision on partial data`);
  const out: string[] = [];
  if (queue > p.queue_per_replica * n) out.push(`queue ${queue} > ${p.queue_per_replica} x ${n} replicas`);
  if (usage > p.token_usage_high) out.push(`token usage ${metrics.token_usage} > ${p.token_usage_high}`);
  if (p.queue_time_p95_s !== undefined && p95 !== null && p95 > p.queue_time_p95_s)
    out.push(
      `queue time P95 ${metrics.queue_time_p95 ?? 'past the last bucket'} s > ${p.queue_time_p95_s} s`,
    );
  const cooling = sinceLastActionS !== null && sinceLastActionS < p.cooldown_s;
  if (out.length > 0) {
    if (n >= p.max_replicas) return none(`${out.join('; ')}, but at max_replicas ${p.max_replicas}`);
    if (cooling)
      return none(
        `${out.join('; ')}, but cooling down (${sinceLastActionS?.toFixed(0)} of ${p.cooldown_s} s)`,
      );
    // Enough replicas for the queue at the threshold, at least one more, at most max.
    const want = Math.max(n + 1, Math.ceil(queue / Math.max(1, p.queue_per_replica)));
    return {
      action: 'scale_out',
      from: n,
      target: Math.min(p.max_replicas, want),
      reason: out.join('; '),
      metrics,
    };
  }
  if (queue === 0 && usage < p.token_usage_low && n > p.min_replicas) {
    const why = `idle: queue 0, token usage ${metrics.token_usage} < ${p.token_usage_low}`;
    if (cooling)
      return none(`${why}, but cooling down (${sinceLastActionS?.toFixed(0)} of ${p.cooldown_s} s)`);
    return { action: 'scale_in', from: n, target: n - 1, reason: why, metrics };
  }
  return none('within thresholds');
}

/** The gauges of one engine's Prometheus text (`sglang:num_queue_reqs` and `sglang:num_running_reqs` summed over its DP ranks,
 * `sglang:token_usage` averaged) and its `sglang:queue_time_seconds` buckets (summed), or null when it has
 * neither gauge. */
export function parseEngineMetrics(text: string): EngineSample | null {
  const values = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].map((m) => Number(m[1]));
  const q = values('sglang:num_queue_reqs');
  const u = values('sglang:token_usage');
  const running = values('sglang:num_running_reqs');
  if (q.length === 0 && u.length === 0) return null;
  const buckets = new Map<number, number>();
  for (const m of text.matchAll(/^sglang:queue_time_seconds_bucket\{[^}]*\ble="([^"]+)"[^}]*\} (\S+)$/gm)) {
    const le = m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[1]);
    buckets.set(le, (buckets.get(le) ?? 0) + Number(m[2]));
  }
  return {
    queue: q.reduce((s, x) => s + x, 0),
    tokenUsage: u.length === 0 ? 0 : u.reduce((s, x) => s + x, 0) / u.length,
    running: running.reduce((s, x) => s + x, 0),
    ...(buckets.size === 0 ? {} : { queueTime: buckets }),
  };
}

/**
 * The optional built-in autoscaler: each `tick()` reads every eligible replica's SGLang `/metrics` (engines
 * launched with `--enable-metrics`), decides per policy (`decideScale`) and runs the decision as a scale
 * operation of actor `autoscaler`. A decision that acts or is refused, and the first quiet one after it, is an
 * audit event (`autoscale.decision`: action, from, target, reason, the metrics it saw), so the console shows why
 * without a record of every quiet tick. A model with a scale operation running is left alone until it ends. Time comes from
 * the clock (the cooldown); `start()` ticks on it.
 */
export class Autoscaler {
  readonly #lastAction = new Map<string, number>();
  /** Models whose last recorded decision was a quiet one. */
  readonly #quiet = new Set<string>();
  /** Each engine's queue-time histogram at the previous reading (the P95 is of the requests since). */
  readonly #queueTimes = new Map<string, ReadonlyMap<number, number>>();
  readonly #stop = new AbortController();

  constructor(
    private readonly policies: readonly AutoscalePolicy[],
    private readonly managers: ReadonlyMap<Role, InferenceManager>,
    private readonly scale: ScaleOperations,
    private readonly events: EventLog,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  async tick(): Promise<ScaleDecision[]> {
    const out: ScaleDecision[] = [];
    for (const p of this.policies) {
      const manager = this.managers.get(p.role);
      if (!manager) continue;
      const d = await this.decide(p, manager);
      this.record(`${p.role}/${p.model}`, d);
      out.push(d);
    }
    return out;
  }

  private async decide(p: AutoscalePolicy, manager: InferenceManager): Promise<ScaleDecision> {
    const key = `${p.role}/${p.model}`;
    const n = manager.scaleCount(p.model).replicas;
    const holder = this.scale.guard.holder(p.role, p.model);
    if (holder)
      return {
        action: 'none',
        from: n,
        target: n,
        reason: `waiting: ${holder.kind} ${holder.id} of ${key} is running`,
        metrics: { engines: 0, queue: 0, token_usage: 0 },
      };
    const samples = (await Promise.all(manager.eligibleEngines(p.model).map((e) => this.sample(e)))).filter(
      (s): s is EngineSample => s !== null,
    );
    const last = this.#lastAction.get(key);
    const d = decideScale(p, n, samples, last === undefined ? null : (this.clock.now() - last) / 1000);
    if (d.action === 'none') return d;
    try {
      const body = { model_name: p.model, num_replicas: d.target };
      const op =
        d.action === 'scale_out'
          ? this.scale.scaleOut(p.role, body, 'autoscaler')
          : this.scale.scaleIn(p.role, body, 'autoscaler');
      this.#lastAction.set(key, this.clock.now());
      return { ...d, reason: `${d.reason} -> ${op.kind} ${op.request_id}` };
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      return { ...d, action: 'none', reason: `${d.reason}; refused: ${why}` };
    }
  }

  /** One engine's reading, with the P95 queue time of the requests queued since its previous one. */
  private async sample(e: { engineId: string; baseUrl: string }): Promise<EngineSample | null> {
    const s = await fetch(`${e.baseUrl}/metrics`, { signal: AbortSignal.timeout(5_000) })
      .then((r) => (r.ok ? r.text() : ''))
      .then(parseEngineMetrics, () => null);
    if (!s?.queueTime) return s;
    const window = histogramDelta(s.queueTime, this.#queueTimes.get(e.engineId));
    this.#queueTimes.set(e.engineId, s.queueTime);
    return { ...s, queueTimeP95: histogramQuantile(window, 0.95) };
  }

  private record(key: string, d: ScaleDecision): void {
    // A quiet decision after a quiet one is not recorded: a model that sleeps in other phases alternates between
    // "no metrics" and "within thresholds" all day. A refusal is never quiet.
    const quiet = d.action === 'none' && !d.reason.includes('; refused: ');
    if (quiet && this.#quiet.has(key)) return;
    if (quiet) this.#quiet.add(key);
    else this.#quiet.delete(key);
    this.events.append({ kind: 'autoscale.decision', subject: key, actor: 'autoscaler', data: { ...d } });
    if (d.action !== 'none') this.logger.info({ model: key, ...d }, `autoscaler: ${d.action} to ${d.target}`);
  }

  /** Ticks every `intervalMs` on the clock until `stop()`. */
  start(intervalMs: number): void {
    void (async () => {
      while (!this.#stop.signal.aborted) {
        await this.clock.sleep(intervalMs, this.#stop.signal).catch(() => undefined);
        if (!this.#stop.signal.aborted)
          await this.tick().catch((e: unknown) =>
            this.logger.error({ err: String(e) }, 'autoscaler tick failed'),
          );
      }
    })();
  }

  stop(): void {
    this.#stop.abort();
  }
}
