/** `sglang:queue_time_seconds`' bucket bounds in sglang 0.5.10.post1 (srt/observability/metrics_collector.py,
 * SchedulerMetricsCollector.queue_time), `+Inf` aside. */
export const QUEUE_TIME_BUCKETS = [
  0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600,
  700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000,
] as const;

/** A Prometheus histogram of the seconds each request waited in the queue before its first forward batch (SGLang
 * observes it once per request, when it first enters a batch: req_time_stats.py set_forward_entry_time). */
export class QueueTimeHistogram {
  /** Per bound, observations at or below it (not cumulative; the text adds them up). */
  private readonly counts = new Array<number>(QUEUE_TIME_BUCKETS.length + 1).fill(0);
  sum = 0;
  count = 0;

  observe(seconds: number): void {
    const i = QUEUE_TIME_BUCKETS.findIndex((b) => seconds <= b);
    const at = i === -1 ? QUEUE_TIME_BUCKETS.length : i;
    this.counts[at] = (this.counts[at] ?? 0) + 1;
    this.sum += seconds;
    this.count++;
  }

  /** Cumulative counts per `le` label, as prometheus_client writes the bounds (`0.0`, `1.0`, `+Inf`). */
  buckets(): Array<[le: string, count: number]> {
    let acc = 0;
    return [...QUEUE_TIME_BUCKETS, Number.POSITIVE_INFINITY].map((b, i) => {
      acc += this.counts[i] ?? 0;
      return [b === Number.POSITIVE_INFINITY ? '+Inf' : Number.isInteger(b) ? `${b}.0` : String(b), acc];
    });
  }
}
