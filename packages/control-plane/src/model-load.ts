import type { Role } from '@uis/spec';
import { parseEngineMetrics } from './autoscaler.ts';
import type { ControlPlane } from './control-plane.ts';

/** One model's load for a KEDA or HPA setup, summed over its serving replicas' SGLang `/metrics`. */
export interface ModelLoad {
  role: Role;
  model: string;
  /** Replicas whose `/metrics` answered this time (the others count for nothing in the sums). */
  reporting: number;
  /** `sglang:num_queue_reqs`, summed. */
  queue: number;
  /** `sglang:num_running_reqs`, summed. */
  running: number;
  /** `sglang:token_usage`, the mean over the replicas that answered. */
  token_usage: number;
  /** Replicas a scale counts now (regular, joined, alive). */
  current: number;
  /** The target of the model's running scale operation, else `current`. */
  desired: number;
}

/**
 * The load of every model whose engines serve SGLang's metrics (a regular group launched with
 * `server_args.enable_metrics`), read from each serving replica at call time (a 2 s bound per engine): what
 * `/metrics` exports per role and model, so a Prometheus-fed KEDA ScaledObject or an HPA on external metrics
 * scales on uis's view of a model instead of scraping every engine.
 */
export async function modelLoads(plane: ControlPlane): Promise<ModelLoad[]> {
  const rows: Array<Promise<ModelLoad>> = [];
  for (const [role, manager] of plane.managers)
    for (const spec of manager.spec.models) {
      const metered = spec.engine_groups.some(
        (g) => g.worker_type === 'regular' && g.server_args.enable_metrics === true,
      );
      if (!metered) continue;
      rows.push(
        (async () => {
          const samples = (
            await Promise.all(
              manager.eligibleEngines(spec.name).map((e) =>
                fetch(`${e.baseUrl}/metrics`, { signal: AbortSignal.timeout(2_000) })
                  .then((r) => (r.ok ? r.text() : ''))
                  .then(parseEngineMetrics, () => null),
              ),
            )
          ).flatMap((s) => (s === null ? [] : [s]));
          const current = manager.scaleCount(spec.name).replicas;
          // The model's fleet operation, if it is a scale (a weight switch holds it too).
          const holder = plane.scale.guard.holder(role, spec.name);
          const scaling = holder?.kind === 'scale_out' || holder?.kind === 'scale_in';
          const target = holder && scaling ? plane.scale.get(holder.id).num_replicas : 0;
          return {
            role,
            model: spec.name,
            reporting: samples.length,
            queue: samples.reduce((n, s) => n + s.queue, 0),
            running: samples.reduce((n, s) => n + (s.running ?? 0), 0),
            token_usage:
              samples.length === 0 ? 0 : samples.reduce((n, s) => n + s.tokenUsage, 0) / samples.length,
            current,
            desired: target > 0 ? target : current,
          };
        })(),
      );
    }
  return Promise.all(rows);
}
