import { type DiscoveryEngine, type DiscoveryModel, deriveModelState, servedModelName } from '@uis/spec';
import type { Registry } from '../registry.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { ManagerSnapshot } from './types.ts';

/** A replica a client may call directly: the routing package's candidate rule (ready, eligible, with an address,
 * a regular worker), which the model's `admission` needs one of when no router serves it. */
function directTarget(e: DiscoveryEngine): boolean {
  return (
    e.state === 'ready' &&
    e.direct_eligible &&
    e.base_url !== null &&
    (e.worker_type === undefined || e.worker_type === 'regular')
  );
}

/** The manager's own state in its snapshot (the engine pool's and the operation queue's). */
export type ManagerStatus = Pick<ManagerSnapshot, 'started' | 'shutdown' | 'created_pgs'>;

/** Projects the manager's state: the role's discovery snapshot (published to its registry after every change)
 * and the manager snapshot of the admin API. Reads every part, writes none. */
export class PublicationProjector {
  constructor(
    private readonly role: string,
    private readonly replicas: ReplicaTable,
    private readonly registry: Registry,
    /** Router URL per model for `route_mode: sglang_router`. */
    private readonly routerUrls: Record<string, string>,
  ) {}

  publish(): void {
    const { replicas } = this;
    const models: Record<string, DiscoveryModel> = {};
    for (const [name, m] of replicas.models) {
      const slots = replicas.slotsOf(name).filter((s) => !s.joining);
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
        if (s.quarantined) e.quarantined = true;
        if (s.replica.worker_type !== 'placeholder') e.worker_type = s.replica.worker_type;
        const sglang = s.engine?.sglangVersion;
        if (sglang !== undefined) e.sglang_version = sglang;
        return e;
      });
      const state = deriveModelState(slots.map((s) => s.state));
      const routerUrl = this.routerUrls[name] ?? null;
      models[name] = {
        state,
        router_url: routerUrl,
        engines,
        weight_version: m.target,
        ...(m.spec.max_staleness !== undefined ? { max_staleness: m.spec.max_staleness } : {}),
        served_model_name: servedModelName(m.spec),
        ...(m.held ? { held: true } : {}),
        admission: state === 'ready' && (routerUrl !== null || engines.some(directTarget)),
        route_mode: m.spec.route_mode,
        weight_source: m.spec.weight_source,
      };
    }
    this.registry.publish({ models });
  }

  snapshot(status: ManagerStatus): ManagerSnapshot {
    const { replicas } = this;
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
          quarantined: s.quarantined,
          sglang_version: s.engine?.sglangVersion ?? null,
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
      role: this.role,
      started: status.started,
      shutdown: status.shutdown,
      models,
      created_pgs: status.created_pgs,
    };
  }
}
