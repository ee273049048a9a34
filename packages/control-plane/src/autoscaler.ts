import type { EventLog, InferenceManager } from '@uis/manager';
import type { Clock, Logger, Role } from '@uis/spec';
import type { ScaleOperations } from './scale-operations.ts';

/** When the built-in autoscaler scales one model (off unless a policy is given). */
export interface AutoscalePolicy {
  role: Role;
  model: string;
  min_replicas: number;
  max_replicas: number;
  /** Scale out when the engines' waiting requests exceed this many per replica (`sglang:num_queue_reqs`). */
  queue_per_replica: number;
  /** Scale out when the mean KV use is above this (`sglang:token_usage`, 0..1). */
  token_usage_high: number;
  /** Scale in (one replica) when the mean KV use is below this and nothing waits. */
  token_usage_low: number;
  /** No decision to act within this long of the last one that acted. */
  cooldown_s: number;
}

/** One engine's gauges, as its `/metrics` gives them. */
export interface EngineSample {
  queue: number;
  tokenUsage: number;
}

export interface ScaleDecision {
  action: 'scale_out' | 'scale_in' | 'none';
  from: number;
  target: number;
  reason: string;
  metrics: { engines: number; queue: number; token_usage: number };
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
  const metrics = { engines: samples.length, queue, token_usage: Number(usage.toFixed(4)) };
  const none = (reason: string): ScaleDecision => ({ action: 'none', from: n, target: n, reason, metrics });
  if (samples.length < n)
    return none(`metrics from ${samples.length} of ${n} replicas: no decision on partial data`);
  const out: string[] = [];
  if (queue > p.queue_per_replica * n) out.push(`queue ${queue} > ${p.queue_per_replica} x ${n} replicas`);
  if (usage > p.token_usage_high) out.push(`token usage ${metrics.token_usage} > ${p.token_usage_high}`);
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

/** The gauges of one engine's Prometheus text (`sglang:num_queue_reqs`, `sglang:token_usage`, summed over its DP
 * ranks / averaged), or null when it has neither. */
export function parseEngineMetrics(text: string): EngineSample | null {
  const values = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].map((m) => Number(m[1]));
  const q = values('sglang:num_queue_reqs');
  const u = values('sglang:token_usage');
  if (q.length === 0 && u.length === 0) return null;
  return {
    queue: q.reduce((s, x) => s + x, 0),
    tokenUsage: u.length === 0 ? 0 : u.reduce((s, x) => s + x, 0) / u.length,
  };
}

/**
 * The optional built-in autoscaler: each `tick()` reads every eligible replica's SGLang `/metrics` (engines
 * launched with `--enable-metrics`), decides per policy (`decideScale`) and runs the decision as a scale
 * operation of actor `autoscaler`; every decision is an audit event (`autoscale.decision`) with its reason and the
 * metrics it saw, so the console's events show why. Time comes from the clock (the cooldown); `start()` ticks on
 * it.
 */
export class Autoscaler {
  readonly #lastAction = new Map<string, number>();
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
      const key = `${p.role}/${p.model}`;
      const engines = manager.eligibleEngines(p.model);
      const samples = (
        await Promise.all(
          engines.map((e) =>
            fetch(`${e.baseUrl}/metrics`, { signal: AbortSignal.timeout(5_000) })
              .then((r) => (r.ok ? r.text() : ''))
              .then(parseEngineMetrics, () => null),
          ),
        )
      ).filter((s): s is EngineSample => s !== null);
      const last = this.#lastAction.get(key);
      const n = manager.scaleCount(p.model).replicas;
      let d = decideScale(p, n, samples, last === undefined ? null : (this.clock.now() - last) / 1000);
      if (d.action !== 'none') {
        try {
          const op =
            d.action === 'scale_out'
              ? this.scale.scaleOut(p.role, { model_name: p.model, num_replicas: d.target }, 'autoscaler')
              : this.scale.scaleIn(p.role, { model_name: p.model, num_replicas: d.target }, 'autoscaler');
          this.#lastAction.set(key, this.clock.now());
          d = { ...d, reason: `${d.reason} -> ${op.kind} ${op.request_id}` };
        } catch (e) {
          d = {
            ...d,
            action: 'none',
            reason: `${d.reason}; refused: ${e instanceof Error ? e.message : String(e)}`,
          };
        }
      }
      this.events.append({ kind: 'autoscale.decision', subject: key, actor: 'autoscaler', data: { ...d } });
      if (d.action !== 'none')
        this.logger.info({ model: key, ...d }, `autoscaler: ${d.action} to ${d.target}`);
      out.push(d);
    }
    return out;
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
