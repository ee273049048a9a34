import { type Clock, type HealthSample, systemClock } from '@uis/spec';

export interface ProbeTarget {
  engineId: string;
  baseUrl: string;
}

/** What the probe reads of a manager: each model's replicas (the manager snapshot's shape). */
interface ReplicaSource {
  snapshot(): {
    models: Record<
      string,
      { replicas: Array<{ engine_id: string; base_url: string | null; state: string }> }
    >;
  };
}

/** Every live replica with a URL, of every manager. */
export function replicaTargets(managers: Iterable<ReplicaSource>): ProbeTarget[] {
  return [...managers].flatMap((m) =>
    Object.values(m.snapshot().models).flatMap((x) =>
      x.replicas.flatMap((r) =>
        r.base_url === null || r.state === 'dead' ? [] : [{ engineId: r.engine_id, baseUrl: r.base_url }],
      ),
    ),
  );
}

export interface HealthProbeOptions {
  /** The replicas to probe now (read at every round). */
  targets: () => ProbeTarget[];
  record: (engineId: string, sample: HealthSample) => void;
  /** Default 5 s. */
  intervalMs?: number;
  /** Default 2 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  clock?: Clock;
}

/** Probes every replica's `GET /health` on a timer so the console has a health history even for replicas that no
 * client calls through the gateway (scorers are called by the batch runner directly). One round at a time. */
export class HealthProbe {
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private readonly controller = new AbortController();

  constructor(private readonly opts: HealthProbeOptions) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.round(), this.opts.intervalMs ?? 5000);
    this.timer.unref();
  }

  async round(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const fetchFn = this.opts.fetch ?? fetch;
    const clock = this.opts.clock ?? systemClock;
    try {
      await Promise.all(
        this.opts.targets().map(async (t) => {
          const t0 = clock.now();
          let sample: HealthSample;
          try {
            const r = await fetchFn(`${t.baseUrl}/health`, {
              signal: AbortSignal.any([
                AbortSignal.timeout(this.opts.timeoutMs ?? 2000),
                this.controller.signal,
              ]),
            });
            await r.arrayBuffer();
            sample = {
              at: t0,
              ok: r.ok,
              latency_ms: clock.now() - t0,
              error: r.ok ? null : `health answered ${r.status}`,
            };
          } catch (e) {
            if (this.controller.signal.aborted) return;
            sample = {
              at: t0,
              ok: false,
              latency_ms: null,
              error: e instanceof Error ? e.message : String(e),
            };
          }
          this.opts.record(t.engineId, sample);
        }),
      );
    } finally {
      this.running = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.controller.abort();
  }
}
