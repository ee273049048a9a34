import {
  type EngineGroupSpec,
  type GroupPlacement,
  type InferenceRoleSpec,
  engineId as makeEngineId,
  type ReplicaPlacement,
} from '@uis/spec';
import { ExternalLauncher } from '../launchers.ts';
import type { Incarnations } from './incarnations.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { RouterSync } from './router-sync.ts';
import type { Audit, ModelRuntime, Slot } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** Engines started elsewhere and attached by URL: health-checked and published like launched ones, never
 * killed. */
export class ExternalEngines {
  constructor(
    private readonly role: InferenceRoleSpec['role'],
    /** This role's groups of the placement plan (an attached engine joins its model's). */
    private readonly placements: readonly GroupPlacement[],
    private readonly replicas: ReplicaTable,
    private readonly incarnations: Incarnations,
    private readonly weights: WeightSync,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly audit: Audit,
  ) {}

  async attach(m: ModelRuntime, url: string): Promise<{ engine_id: string }> {
    const { replicas, incarnations, publication } = this;
    for (const s of replicas.all()) if (s.baseUrl === url) return { engine_id: s.engineId };
    const slot = await this.prepare(m, url);
    const id = slot.engineId;
    publication.publish();
    try {
      await incarnations.launch(slot);
    } catch (e) {
      replicas.remove(slot);
      await slot.engine?.shutdown();
      publication.publish();
      throw e;
    }
    this.weights.adoptVersionOf(m, slot);
    replicas.setState(slot, 'ready');
    await this.routers.sync();
    publication.publish();
    this.audit('admin.register_external', id, { url });
    return { engine_id: id };
  }

  /** A new replica of `m` for the engine at `url`, `starting`, its engine client attached but not yet checked. */
  async prepare(m: ModelRuntime, url: string, kind: { elastic?: boolean } = {}): Promise<Slot> {
    const { replicas, incarnations } = this;
    const index = replicas.nextIndex(m.spec.name);
    const groupIndex = Math.max(
      0,
      m.spec.engine_groups.findIndex((g) => g.worker_type === 'regular'),
    );
    const group = m.spec.engine_groups[groupIndex] as EngineGroupSpec;
    const id = makeEngineId(m.spec.name, index);
    const replica: ReplicaPlacement = {
      engine_id: id,
      replica: index,
      group: groupIndex,
      worker_type: 'regular',
      nnodes: 1,
      nodes: [
        { node: 'external', node_rank: 0, bundle_indices: [], gpu_ids: [], base_gpu_id: 0, gpu_id_step: 1 },
      ],
    };
    const placement =
      this.placements.find((p) => p.model === m.spec.name) ?? this.externalPlacement(m, groupIndex, group);
    const slot = replicas.add(m.spec, group, placement, replica, { external: true, ...kind });
    try {
      // The ExternalLauncher only makes the client: nothing is contacted yet.
      incarnations.attach(
        slot,
        await new ExternalLauncher({ [id]: url }).create(incarnations.launchRequest(slot)),
      );
    } catch (e) {
      replicas.remove(slot);
      throw e;
    }
    return slot;
  }

  /** The placement of an engine attached to a model that has none in the plan. */
  private externalPlacement(m: ModelRuntime, groupIndex: number, group: EngineGroupSpec): GroupPlacement {
    return {
      role: this.role,
      model: m.spec.name,
      group: groupIndex,
      worker_type: 'regular',
      num_gpus: group.num_gpus,
      gpus_per_engine: group.gpus_per_engine,
      tp: 1,
      pp: 1,
      dp: 1,
      ep: 1,
      bundle_start: 0,
      bundle_stop: 0,
      bundle_indices: [],
      gpu_ids: [],
      replicas: [],
      nodes_per_engine: 1,
      pool: 'external',
      owner: 'external',
      deleted_by: 'external',
      activation_group: null,
      phase: null,
      deferred: false,
      ray_num_gpus: 0,
      offload: false,
    };
  }
}
