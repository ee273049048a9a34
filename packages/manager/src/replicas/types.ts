import type { AddWorkerRequest, MemoryTag, SGLangEngine } from '@uis/sglang-engine';
import type {
  DrainPolicy,
  EngineGroupSpec,
  GroupPlacement,
  InferenceModelSpec,
  InferenceRoleSpec,
  ModelDesire,
  PoolPlan,
  ReplicaPlacement,
  ReplicaState,
} from '@uis/spec';
import type { EventLog } from '../event-log.ts';
import type { Launcher } from '../launchers.ts';
import type { PlacementGroups } from '../placement-groups.ts';
import type { Registry } from '../registry.ts';
import type { Clock, Logger } from '../runtime.ts';
import type { Db } from '../store.ts';
import type { ReplayableWeightUpdate } from '../weight-update.ts';

/** The router operations the manager needs (`SGLangRouterClient` of sglang-engine implements them). */
export interface RouterRegistrar {
  addWorker(req: AddWorkerRequest): Promise<unknown>;
  removeWorker(url: string): Promise<void>;
}

export interface ManagerOptions {
  /** Deadline of one engine start (launch + healthy). Default 10 min. */
  startDeadlineMs?: number;
  /** Period of health checks. Default 5 s. */
  healthIntervalMs?: number;
  /** Deadline of one health check. Default 5 s. */
  healthTimeoutMs?: number;
  /** Consecutive failed checks before a replica is declared dead. Default 3. */
  failuresToDead?: number;
  /** Restart backoff (doubles per failed attempt up to the max). Defaults 1 s / 60 s. */
  restartBackoffMs?: number;
  restartBackoffMaxMs?: number;
  /** Drain: how long to wait for in-flight work, and what to do with the rest. Defaults 120 s / wait. */
  drainDeadlineMs?: number;
  drainPolicy?: DrainPolicy;
  /** Router URL per model for `route_mode: sglang_router` (the router process is started elsewhere). */
  routerUrls?: Record<string, string>;
}

export type ResolvedManagerOptions = Required<Omit<ManagerOptions, 'routerUrls'>> & {
  routerUrls: Record<string, string>;
};

export interface InferenceManagerInit {
  role: InferenceRoleSpec;
  /** This role's groups from the placement plan (other roles' entries are ignored). */
  placements: GroupPlacement[];
  /** The plan's pools: the manager creates/deletes the PGs it owns (`owner: manager`) and no others. */
  pools?: Record<string, PoolPlan>;
  launcher: Launcher;
  registry?: Registry;
  placementGroups?: PlacementGroups;
  /** Router client per model (router mode). */
  routers?: Record<string, RouterRegistrar>;
  events?: EventLog;
  /** The manager's database: when `events` is not given, the audit log is kept here. The engines the launcher
   * starts are recorded here too (when it can adopt engines), so that a restart finds them. */
  store?: Db;
  /** Adoption mode: a start adopts the recorded engines that still run and match instead of launching new ones
   * (the launcher must keep its engines across restarts, e.g. `LocalLauncher({ keepEngines: true })`). */
  adoptEngines?: boolean;
  clock?: Clock;
  logger?: Logger;
  options?: ManagerOptions;
}

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
  /** Added by `scale` on reserved bundles. */
  readonly elastic: boolean;
  /** ReplicaTable: changed only through `setState`, the spec's transition table. */
  state: ReplicaState;
  /** ReplicaTable: bumped (`invalidate`) on death, restart, removal and shutdown so async work that started
   * before (a health check, an exit handler) notices it lost the slot. */
  epoch: number;
  /** EnginePool: the running incarnation. */
  engine: SGLangEngine | null;
  baseUrl: string | null;
  /** Recovery: which incarnation this is (bumped by each restart). */
  generation: number;
  /** WeightSync: the version the engine reported last (a sleeping engine's weights do not change). */
  weightVersion: string | null;
  /** Residency: whether the engine reported its memory released, and the memory tags resumed while onloading. */
  memory: { released: boolean; resumed: Set<MemoryTag> };
  /** Recovery: consecutive failed health checks; a restart running; a restart deferred to the model's next
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
  /** Residency: what the role's last activate/drain asked of this model. */
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
