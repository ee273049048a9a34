import { type ControlPlane, modelLoads } from '@uis/control-plane';
import type { Role } from '@uis/spec';
import type { InferenceGateway } from '../gateway/inference-gateway.ts';
import type { MetricsSources } from './gateway-metrics.ts';
import type { WeightVersionHistory } from './weight-versions.ts';

/** Where `/metrics` reads live state at scrape time: the role gateways (in flight, breakers) and the plane
 * (replicas, topology, batches, weight versions, each metered model's load). */
export function metricsSources(
  plane: ControlPlane,
  gateways: ReadonlyMap<Role, InferenceGateway>,
  weights: () => WeightVersionHistory,
): MetricsSources {
  return {
    inFlight: () =>
      [...gateways].flatMap(([role, g]) =>
        Object.entries(g.inFlight.snapshot()).map(([engine_id, count]) => ({ role, engine_id, count })),
      ),
    replicaStates: () => {
      const out: Array<{ role: string; model: string; state: string; count: number }> = [];
      for (const [role, m] of plane.managers)
        for (const [model, x] of Object.entries(m.snapshot().models)) {
          const counts = new Map<string, number>();
          for (const r of x.replicas) counts.set(r.state, (counts.get(r.state) ?? 0) + 1);
          for (const [state, count] of counts) out.push({ role, model, state, count });
        }
      return out;
    },
    topologyRevisions: () =>
      [...plane.managers].map(([role, m]) => ({ role, revision: m.registry.revision })),
    batchCounts: () => plane.store.counts(),
    replicaWeights: () => weights().rows(plane.managers),
    circuits: () =>
      [...gateways].flatMap(([role, g]) =>
        g.breakers
          .snapshot()
          .map((c) => ({ role, engine_id: c.engineId, state: c.state === 'open' ? 2 : 1 })),
      ),
    modelLoad: () => modelLoads(plane),
  };
}
