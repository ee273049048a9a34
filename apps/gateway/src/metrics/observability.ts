import type { AuditEvent } from '@uis/manager';
import type { PlacementPlan } from '@uis/spec';
import type { GatewayMetrics } from './gateway-metrics.ts';
import { type BarrierNow, GpuTimeTracker } from './gpu-time-tracker.ts';
import { TimeSeriesRing } from './time-series-ring.ts';
import { TransitionParts } from './transition-parts.ts';
import { WeightVersionHistory } from './weight-versions.ts';

/** A served request as the time series need it. */
export interface ServedSample {
  role: string;
  model: string;
  status: number;
  totalMs: number;
  ttftMs?: number | undefined;
  usage?: { prompt: number; completion: number } | undefined;
  at: number;
}

/**
 * What the server feeds from its request completions, audit log and barrier board, and what the console and
 * `/metrics` read back: the per role+model time series ring, the GPU-time view per RL step, transition parts and
 * replica weight lag. One object so the server wires three subscriptions, not a dozen.
 */
export class Observability {
  // Created as the server starts: the series begin then, not a whole window before the service existed.
  readonly ring = new TimeSeriesRing(900, 10, Date.now());
  readonly gpuTime: GpuTimeTracker;
  readonly weights = new WeightVersionHistory();
  readonly #parts: TransitionParts;

  constructor(metrics: GatewayMetrics, plan: PlacementPlan) {
    this.#parts = new TransitionParts(metrics);
    this.gpuTime = new GpuTimeTracker({ plan, registry: metrics.registry });
  }

  served(r: ServedSample): void {
    this.ring.add(
      r.role,
      r.model,
      r.status,
      r.totalMs,
      r.ttftMs,
      r.usage === undefined ? 0 : r.usage.completion,
      r.at,
    );
  }

  /** A new audit event (`live`), or one read back at startup (the GPU-time view only: metrics count from now). */
  audit(e: AuditEvent, live = true): void {
    if (live) {
      this.#parts.observe(e);
      this.weights.observe(e);
    }
    this.gpuTime.observe(e);
  }

  barriers(list: readonly BarrierNow[], now: number): void {
    this.gpuTime.barriers(list, now);
  }
}
