import type { SimEngine } from './engine.ts';
import type { SimOptions } from './options.ts';

/** SGLang's scheduler gauges the simulator models, with SGLang's names and help text (sglang 0.5.10.post1,
 * srt/observability/metrics_collector.py, SchedulerMetricsCollector), the ones Relax's autoscaler reads. */
const GAUGES = [
  ['sglang:num_running_reqs', 'The number of running requests.'],
  ['sglang:num_used_tokens', 'The number of used tokens.'],
  ['sglang:token_usage', 'The token usage.'],
  ['sglang:num_queue_reqs', 'The number of requests in the waiting queue.'],
  ['sglang:max_total_num_tokens', 'Maximum total number of tokens in the KV cache pool.'],
] as const;

/** Prometheus' text format for a float, as prometheus_client writes it (`0.0`, `12.0`, `0.25`). */
function num(v: number): string {
  return Number.isInteger(v) ? `${v}.0` : String(v);
}

/**
 * `GET /metrics` of an engine launched with `--enable-metrics`: SGLang mounts prometheus_client's ASGI app there
 * (srt/utils/common.py add_prometheus_middleware). One sample per DP rank, labelled as SGLang's scheduler labels
 * them (scheduler_metrics_mixin.py: model_name = served model name, engine_type, tp_rank, pp_rank, moe_ep_rank,
 * and dp_rank when there are DP ranks). Token usage is the KV cache's used share of its capacity.
 */
export function metricsText(
  engine: SimEngine,
  options: Pick<SimOptions, 'simKvCapacityTokens' | 'dpSize'>,
): string {
  const loads = engine.load();
  const capacity = options.simKvCapacityTokens;
  const rows = loads.map((l) => {
    const labels = [
      `model_name="${engine.servedModelName.replace(/["\\\n]/g, '_')}"`,
      'engine_type="unified"',
      'tp_rank="0"',
      'pp_rank="0"',
      'moe_ep_rank="0"',
      ...(options.dpSize > 1 ? [`dp_rank="${l.dp_rank}"`] : []),
    ].join(',');
    const values: Record<(typeof GAUGES)[number][0], number> = {
      'sglang:num_running_reqs': l.num_reqs - l.num_waiting_reqs,
      'sglang:num_used_tokens': l.num_tokens,
      'sglang:token_usage': capacity > 0 ? l.num_tokens / capacity : 0,
      'sglang:num_queue_reqs': l.num_waiting_reqs,
      'sglang:max_total_num_tokens': capacity,
    };
    return { labels, values };
  });
  const out: string[] = [];
  for (const [name, help] of GAUGES) {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const r of rows) out.push(`${name}{${r.labels}} ${num(r.values[name])}`);
  }
  // One scheduler serves every DP rank here: its histogram carries the first rank's labels.
  const labels = rows[0]?.labels;
  if (labels !== undefined) {
    const h = engine.queueTime;
    const name = 'sglang:queue_time_seconds';
    out.push(`# HELP ${name} Histogram of queueing time in seconds.`, `# TYPE ${name} histogram`);
    for (const [le, c] of h.buckets()) out.push(`${name}_bucket{${labels},le="${le}"} ${num(c)}`);
    out.push(`${name}_count{${labels}} ${num(h.count)}`, `${name}_sum{${labels}} ${num(h.sum)}`);
  }
  return `${out.join('\n')}\n`;
}
