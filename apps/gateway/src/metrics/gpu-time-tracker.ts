import {
  GPU_TIME_PARTS,
  type GpuStep,
  type GpuTimePrediction,
  type GpuTimeReport,
  type GroupMemoryPlan,
  type PlacementPlan,
} from '@uis/spec';
import { Counter, Gauge, type Registry } from 'prom-client';
import { type BarrierInterval, gpuTimeSteps, type TimelineEvent } from './gpu-time.ts';

const KINDS = new Set(['phase.entered', 'transition.started', 'transition.step', 'replica.weights_synced']);

/** A barrier the board lists as waited on now. */
export interface BarrierNow {
  group: string | null;
  phase: string;
  since: number;
}

export interface GpuTimeTrackerOptions {
  plan: PlacementPlan;
  /** Steps kept per group for the view (older ones only live on in the metrics). Default 30. */
  steps?: number;
  /** Records kept (a few hundred per step). Default 20000. */
  records?: number;
  registry?: Registry;
}

/**
 * Keeps the records the GPU-time view needs (transition steps, phases entered, weight syncs, barrier waits), turns
 * them into steps with {@link gpuTimeSteps}, and reports each completed step as metrics: GPU-seconds per part
 * (a counter) and the last step's shares (a gauge).
 */
export class GpuTimeTracker {
  readonly #plan: PlacementPlan;
  readonly #events: TimelineEvent[] = [];
  readonly #barriers: BarrierInterval[] = [];
  #open = new Map<string, BarrierNow>();
  readonly #counted = new Map<string, number>();
  readonly #listeners = new Set<() => void>();
  readonly #maxSteps: number;
  readonly #maxRecords: number;
  readonly #seconds: Counter<'group' | 'part'> | undefined;
  readonly #share: Gauge<'group' | 'part'> | undefined;
  #cache: GpuTimeReport | undefined;

  constructor(opts: GpuTimeTrackerOptions) {
    this.#plan = opts.plan;
    this.#maxSteps = opts.steps ?? 30;
    this.#maxRecords = opts.records ?? 20_000;
    if (opts.registry !== undefined) {
      const registers = [opts.registry];
      this.#seconds = new Counter({
        name: 'uis_gpu_time_seconds_total',
        help: 'GPU-seconds of completed RL steps per activation group and part (work, batch_run, release, onload, weight_sync, barrier_wait, other).',
        labelNames: ['group', 'part'],
        registers,
      });
      this.#share = new Gauge({
        name: 'uis_gpu_time_step_share',
        help: 'Share of the last completed RL step\u2019s GPU time per activation group and part (0..1).',
        labelNames: ['group', 'part'],
        registers,
      });
    }
  }

  /** Called on each change of the view (a record that may complete a step). */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  observe(e: TimelineEvent): void {
    if (!KINDS.has(e.kind)) return;
    this.#events.push(e);
    if (this.#events.length > this.#maxRecords)
      this.#events.splice(0, this.#events.length - this.#maxRecords);
    this.#cache = undefined;
    if (e.kind === 'phase.entered') {
      this.#count();
      for (const l of [...this.#listeners]) l();
    }
  }

  /** The barrier board's current waiters; a waiter that is gone ended its wait at `now`. */
  barriers(list: readonly BarrierNow[], now: number): void {
    const next = new Map(list.map((b) => [`${b.group ?? ''}\u0000${b.phase}\u0000${b.since}`, b]));
    for (const [key, b] of this.#open)
      if (!next.has(key)) this.#barriers.push({ group: b.group, phase: b.phase, from: b.since, to: now });
    if (this.#barriers.length > 1000) this.#barriers.splice(0, this.#barriers.length - 1000);
    this.#open = next;
    this.#cache = undefined;
  }

  #steps(groupName: string): GpuStep[] {
    const group = this.#plan.activation_groups.find((g) => g.name === groupName);
    if (group === undefined) return [];
    const pool = this.#plan.pools[group.pool];
    const bundles = pool ? pool.bundles.map((b) => b.index) : [];
    const placements = this.#plan.placements.filter((p) => p.activation_group === groupName);
    return gpuTimeSteps({
      group,
      bundles,
      bundlesOf: (role) => placements.filter((p) => p.role === role).flatMap((p) => p.bundle_indices),
      events: this.#events,
      barriers: this.#barriers,
    });
  }

  report(): GpuTimeReport {
    this.#cache ??= {
      groups: this.#plan.activation_groups.map((g) => ({
        group: g.name,
        first_phase: g.phases[0]?.name ?? '',
        steps: this.#steps(g.name).slice(-this.#maxSteps),
        ...predictionOf(this.#plan.memory?.find((m) => m.group === g.name)),
      })),
    };
    return this.#cache;
  }

  /** Adds steps completed since the last count to the metrics. */
  #count(): void {
    if (this.#seconds === undefined) return;
    for (const g of this.report().groups) {
      const done = this.#counted.get(g.group) ?? 0;
      const fresh = g.steps.filter((s) => s.to > done);
      for (const s of fresh)
        for (const part of GPU_TIME_PARTS)
          this.#seconds.inc({ group: g.group, part }, s.gpu_seconds[part] ?? 0);
      const last = g.steps[g.steps.length - 1];
      if (last === undefined) continue;
      this.#counted.set(g.group, last.to);
      for (const part of GPU_TIME_PARTS) this.#share?.set({ group: g.group, part }, last.shares[part] ?? 0);
    }
  }
}

/** The memory plan's prediction for the GPU-time view: per switch the predicted seconds, the seconds of releasing
 * everything, and the tags left in place that make the difference. */
function predictionOf(m: GroupMemoryPlan | undefined): { predicted?: GpuTimePrediction } {
  if (m === undefined || m.unsized.length > 0) return {};
  const used = m.order === 'optimized' ? m.optimized : m.configured;
  const switches = used.switches.map((s) => {
    const all = m.release_all.switches.find((x) => x.from === s.from && x.to === s.to);
    const kept = (all?.moves ?? []).flatMap((a) => {
      const mine = s.moves.find((x) => x.model === a.model);
      const tags = [...a.release, ...a.resume].filter(
        (t) => !(mine?.release.includes(t) || mine?.resume.includes(t)),
      );
      return tags.length === 0 ? [] : [`${a.model}: ${[...new Set(tags)].join('+')}`];
    });
    return {
      from: s.from,
      to: s.to,
      predicted_s: s.predicted_s,
      release_all_s: all?.predicted_s ?? s.predicted_s,
      kept,
    };
  });
  return {
    predicted: {
      order: m.order,
      bubble_s: used.bubble_s,
      release_all_bubble_s: m.release_all.bubble_s,
      configured_bubble_s: m.configured.bubble_s,
      switches,
    },
  };
}
