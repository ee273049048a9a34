import { type DiscoveryEngine, type DiscoveryModel, deriveModelState, servedModelName } from '@uis/spec';
import type { Registry } from '../registry.ts';
import type { ManagerContext } from './context.ts';
import type { ManagerSnapshot } from './types.ts';

/** Projects the manager's state: the role's discovery snapshot (published to its registry after every change)
 * and the manager snapshot of the admin API. Reads every part, writes none. */
export class PublicationProjector {
  constructor(
    private readonly ctx: ManagerContext,
    private readonly registry: Registry,
  ) {}

  publish(): void {
    const { replicas, opts } = this.ctx;
    const models: Record<string, DiscoveryModel> = {};
    for (const [name, m] of replicas.models) {
      const slots = replicas.slotsOf(name);
      const engines: DiscoveryEngine[] = slots.map((s) => {
        const e: DiscoveryEngine = {
          engine_id: s.engineId,
          base_url: s.baseUrl,
          state: s.state,
          direct_eligible: replicas.eligible(s),
          weight_version: s.weightVersion,
          group: s.replica.group,
          generation: s.generation,
        };
        if (s.replica.worker_type !== 'placeholder') e.worker_type = s.replica.worker_type;
        return e;
      });
      models[name] = {
        state: deriveModelState(slots.map((s) => s.state)),
        router_url: opts.routerUrls[name] ?? null,
        engines,
        weight_version: m.target,
        served_model_name: servedModelName(m.spec),
        ...(m.held ? { held: true } : {}),
      };
    }
    this.registry.publish({ models });
  }

  snapshot(): ManagerSnapshot {
    const { replicas, pool, queue } = this.ctx;
    const models: ManagerSnapshot['models'] = {};
    for (const [name, m] of replicas.models) {
      models[name] = {
        desire: m.desire,
        held: m.held,
        target_weight_version: m.target,
        replicas: replicas.slotsOf(name).map((s) => ({
          engine_id: s.engineId,
          state: s.state,
          base_url: s.baseUrl,
          weight_version: s.weightVersion,
          generation: s.generation,
          memory_released: s.memory.released,
          external: s.external,
          elastic: s.elastic,
          failures: s.health.failures,
          pids: s.engine?.pids() ?? [],
        })),
      };
    }
    return {
      role: this.ctx.role,
      started: pool.started,
      shutdown: queue.closed,
      models,
      created_pgs: pool.createdPgs(),
    };
  }
}
