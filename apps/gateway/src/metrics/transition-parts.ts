import type { AuditEvent } from '@uis/manager';
import type { GatewayMetrics } from './gateway-metrics.ts';
import { coveredMs, type Interval } from './intervals.ts';

/** Weight syncs older than this cannot fall inside an onload still to be reported. */
const SYNC_MEMORY_MS = 30 * 60_000;

/**
 * Splits each phase transition into its parts from the audit log: `release` (drain + offload of the leaving
 * phase), `onload` (resuming memory, without weight sync), `weight_sync` (replicas brought to the target version
 * while onloading; parallel syncs count once), `batch_run` (the phase's deferred batches). Barrier waits are
 * reported by whoever sees them ({@link barrierWait}).
 */
export class TransitionParts {
  readonly #syncs: Interval[] = [];

  constructor(private readonly metrics: GatewayMetrics) {}

  observe(e: AuditEvent): void {
    if (e.kind === 'replica.weights_synced' && e.duration_ms !== null) {
      this.#syncs.push({ from: e.at - e.duration_ms, to: e.at });
      while (this.#syncs.length > 0 && (this.#syncs[0] as Interval).to < e.at - SYNC_MEMORY_MS)
        this.#syncs.shift();
      return;
    }
    if (e.kind === 'transition.completed' || e.kind === 'lease.blocked') {
      const to = typeof e.data.to === 'string' ? e.data.to : '?';
      this.metrics.phaseTransitions.observe(
        { group: e.subject, to, outcome: e.kind === 'lease.blocked' ? 'failed' : 'ok' },
        (e.duration_ms ?? 0) / 1000,
      );
      return;
    }
    if (e.kind !== 'transition.step' || e.duration_ms === null) return;
    const observe = (part: string, ms: number) =>
      this.metrics.transitionParts.observe({ group: e.subject, part }, ms / 1000);
    const step = e.data.step;
    if (step === 'offload') observe('release', e.duration_ms);
    else if (step === 'tasks') observe('batch_run', e.duration_ms);
    else if (step === 'onload') {
      const sync = coveredMs(this.#syncs, { from: e.at - e.duration_ms, to: e.at });
      observe('onload', e.duration_ms - sync);
      observe('weight_sync', sync);
    }
  }

  /** A trainer waited `ms` at a barrier of `group` while another phase held its GPUs. */
  barrierWait(group: string, ms: number): void {
    this.metrics.transitionParts.observe({ group, part: 'barrier_wait' }, ms / 1000);
  }
}
