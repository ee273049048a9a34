import type { AddWorkerRequest, MemoryTag, SGLangEngine } from '@uis/sglang-engine';
import type {
  EngineGroupSpec,
  GroupPlacement,
  InferenceModelSpec,
  ModelDesire,
  ReplicaPlacement,
  ReplicaState,
} from '@uis/spec';
import type { ReplayableWeightUpdate } from '../weight-update.ts';

/** The router operations the manager needs (`SGLangRouterClient` of sglang-engine implements them). */
export interface RouterRegistrar {
  addWorker(req: AddWorkerRequest): Promise<unknown>;
  removeWorker(url: string): Promise<void>;
}

/** Writes one audit event of the manager (its actor is the role). */
export type Audit = (
  kind: string,
  subject: string,
  data: Record<string, unknown>,
  durationMs?: number,
) => void;

export const ALL_TAGS: readonly MemoryTag[] = ['weights', 'kv_cache', 'cuda_graph'];

/** One replica of a model. Its fields are grouped by the part that owns (writes) them; the others only read. */
export interface Slot {
  readonly engineId: string;
  readonly index: number;
  readonly model: string;
  readonly spec: InferenceModelSpec;
  readonly group: EngineGroupSpec;
  readonly placement: GroupPlacement;
  readonly replica: ReplicaPlacement;
  /** Attached by URL: health-checked and published, never launched or killed here. */
  readonly external: boolean;
  /** Added by a scale-out (on reserved bundles, or attached by URL); a scale-in takes these first. */
  readonly elastic: boolean;
  /** ElasticScaler: a scaled-out replica still being prechecked and synced: published and eligible only once it
   * joins, all of its operation's replicas in one topology revision. */
  joining: boolean;
  /** ReplicaTable: changed only through `setState`, the spec's transition table. */
  state: ReplicaState;
  /** ReplicaTable: bumped (`invalidate`) on death, restart, removal and shutdown so async work that started
   * before (a health check, an exit handler) notices it lost the slot. */
  epoch: number;
  /** Incarnations: the running incarnation. */
  engine: SGLangEngine | null;
  baseUrl: string | null;
  /** Recovery: which incarnation this is (bumped by each restart). */
  generation: number;
  /** WeightSync: the version the engine reported last (a sleeping engine's weights do not change). */
  weightVersion: string | null;
  /** WeightSwitch: its update failed in a switch; never eligible until an operator restarts it. */
  quarantined: boolean;
  /** MemoryLedger (launch, stop), Residency (offload) and Onload: whether the engine reported its memory released,
   * and the memory tags resumed while onloading. */
  memory: { released: boolean; resumed: Set<MemoryTag> };
  /** Health: consecutive failed health checks. Recovery: a restart running; a restart deferred to the model's next
   * onload (it died while its model slept); the background recovery a drain waits for. */
  health: {
    failures: number;
    restarting: boolean;
    restartPending: boolean;
    recovery: Promise<void> | null;
  };
  /** RouterSync: the URL the router lists for this replica, and URLs it may still list (a removal that failed),
   * retried on every sync. */
  router: { url: string | null; stale: string[] };
}

export interface ModelRuntime {
  readonly spec: InferenceModelSpec;
  /** WeightSync: the version every eligible replica must report. */
  target: string | null;
  /** WeightSync: the last weight update that can be replayed on a replica that comes back (disk / version). */
  replay: ReplayableWeightUpdate | null;
  /** WeightSync: registered with the trainer's weight sync service. */
  dcsRegistered: boolean;
  /** Onload (active) and Residency (sleeping): what the role's last activate/drain asked of this model. */
  desire: ModelDesire;
  /** Operator intent (the façade): drained by an operator (`drainModel`), so role-wide activations (phase
   * changes) skip it until `activateModel`. */
  held: boolean;
}

export interface ManagerSnapshot {
  role: string;
  started: boolean;
  shutdown: boolean;
  models: Record<
    string,
    {
      desire: ModelDesire;
      /** Drained by an operator: phase changes leave it asleep until `activateModel`. */
      held: boolean;
      target_weight_version: string | null;
      replicas: Array<{
        engine_id: string;
        state: ReplicaState;
        base_url: string | null;
        weight_version: string | null;
        /** Its update failed in a weight switch: not routable until an operator restarts it. */
        quarantined: boolean;
        /** The SGLang release the engine reports (server info), once it was healthy. */
        sglang_version: string | null;
        generation: number;
        memory_released: boolean;
        external: boolean;
        elastic: boolean;
        failures: number;
        pids: number[];
      }>;
    }
  >;
  created_pgs: string[];
}
