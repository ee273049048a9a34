import type {
  BatchRunner,
  BatchStore,
  DatabaseHolder,
  Db,
  EventLog,
  InferenceManager,
  Launcher,
  LifecycleCoordinator,
  ModelRouters,
  OperationLedger,
  StorageHealth,
} from '@uis/manager';
import type { MemoryTag } from '@uis/sglang-engine';
import {
  type GpuRef,
  type InferenceRoleSpec,
  type Logger,
  type PlacementPlan,
  type Role,
  type UisConfig,
  UisError,
} from '@uis/spec';
import type { BarrierBoard } from './barrier-board.ts';
import type { StartedRay } from './launchers/ray.ts';
import type { OperatorIntents } from './operator-intents.ts';
import { managerOfRole } from './role-manager.ts';
import type { ScaleOperations } from './scale-operations.ts';
import type { ControlPlaneStream } from './stream.ts';
import type { UndeferredBatches } from './undeferred-batches.ts';

/** A launcher that knows where its replicas really run (the Ray launcher: what Ray reports). */
interface PlacementReporter {
  actualPlacement(engineId: string): GpuRef[] | undefined;
}
const reportsPlacement = (l: unknown): l is PlacementReporter =>
  typeof (l as Partial<PlacementReporter>).actualPlacement === 'function';

/** What `createControlPlane` built and started, handed over in one piece. */
export interface ControlPlaneParts {
  config: UisConfig;
  plan: PlacementPlan;
  roles: Partial<Record<Role, InferenceRoleSpec>>;
  managers: Map<Role, InferenceManager>;
  db: Db;
  events: EventLog;
  store: BatchStore;
  coordinator: LifecycleCoordinator;
  runner: BatchRunner;
  launcher: Launcher;
  ray: StartedRay | null;
  routers: Map<Role, ModelRouters>;
  /** The router URL map each routed role's manager reads when it publishes; emptied on stop. */
  routerUrls: Map<Role, Record<string, string>>;
  undeferred: UndeferredBatches;
  barriers: BarrierBoard;
  stream: ControlPlaneStream;
  /** Operation ids of keyed commands and their results (durable). */
  ledger: OperationLedger;
  /** The operator's standing drains and holds, re-applied after a restart. */
  intents: OperatorIntents;
  /** Scale operations (durable, resumed after a restart) and the per-model guard of fleet operations. */
  scale: ScaleOperations;
  logger: Logger;
  /** The database file's writes: storage errors as the table's codes, logged once per burst. */
  storage: StorageHealth;
  /** This process's hold on the database file (null for an in-memory one); given up last on stop. */
  holder: DatabaseHolder | null;
  /** Unsubscribes and timers `stop()` ends first. */
  cleanups: Array<() => void>;
}

/**
 * A running control plane: the plan, one InferenceManager per role, the event log, durable batches, the
 * LifecycleCoordinator of the config's activation groups (with deferred scoring wired in), the trainer barriers and
 * a typed stream of every change. Built only by `createControlPlane`, which starts every part before its users.
 */
export class ControlPlane {
  readonly config: UisConfig;
  readonly plan: PlacementPlan;
  readonly roles: Partial<Record<Role, InferenceRoleSpec>>;
  readonly managers: ReadonlyMap<Role, InferenceManager>;
  readonly db: Db;
  /** The durable audit log (SQLite). */
  readonly events: EventLog;
  readonly store: BatchStore;
  readonly coordinator: LifecycleCoordinator;
  readonly runner: BatchRunner;
  readonly launcher: Launcher;
  /** `launcher: ray` only: the Ray runtime and the head this run started. */
  readonly ray: StartedRay | null;
  readonly barriers: BarrierBoard;
  /** Every change as a typed event: audit events, topology publications, barrier waiters, batch progress. */
  readonly stream: ControlPlaneStream;
  /** Operation ids of keyed commands and their results (durable). */
  readonly ledger: OperationLedger;
  /** The operator's standing drains and holds (durable; a restart re-applies them before serving). */
  readonly intents: OperatorIntents;
  /** Scale-out / scale-in operations; `scale.guard` holds a model for one fleet operation at a time. */
  readonly scale: ScaleOperations;
  /** The service's logger (commands, phase moves and engine starts log through it). */
  readonly logger: Logger;
  /** The database file's writes (storage errors as `storage_full` / `storage_unwritable`). */
  readonly storage: StorageHealth;
  /** This process's hold on the database file (one writer per database). */
  readonly holder: DatabaseHolder | null;
  private readonly parts: ControlPlaneParts;
  private stopping: Promise<void> | null = null;

  constructor(parts: ControlPlaneParts) {
    this.parts = parts;
    this.config = parts.config;
    this.plan = parts.plan;
    this.roles = parts.roles;
    this.managers = parts.managers;
    this.db = parts.db;
    this.events = parts.events;
    this.store = parts.store;
    this.coordinator = parts.coordinator;
    this.runner = parts.runner;
    this.launcher = parts.launcher;
    this.ray = parts.ray;
    this.barriers = parts.barriers;
    this.stream = parts.stream;
    this.ledger = parts.ledger;
    this.intents = parts.intents;
    this.scale = parts.scale;
    this.logger = parts.logger;
    this.storage = parts.storage;
    this.holder = parts.holder;
  }

  /** The role's placements from the plan. */
  placementsOf(role: Role) {
    return this.plan.placements.filter((p) => p.role === role);
  }

  /** Where a replica really runs, when the launcher knows (Ray: the nodes and GPUs Ray gave its bundles); null
   * for launchers that only know the plan (sim, local, external). */
  actualPlacement(engineId: string): GpuRef[] | null {
    return reportsPlacement(this.launcher) ? (this.launcher.actualPlacement(engineId) ?? null) : null;
  }

  /** True when a role's batches wait for a phase of an activation group (deferred scoring). */
  deferred(role: string): boolean {
    return this.plan.activation_groups.some((g) => g.phases.some((p) => p.residents.includes(role)));
  }

  /** Schedules a sealed batch: a role with a defer schedule scores it when its phase is resident, any other role
   * right away. */
  runWhenSealed(batchId: string): void {
    const info = this.store.get(batchId);
    if (this.deferred(info.role)) return;
    this.parts.undeferred.run(batchId);
  }

  /** An operator's activation of one model of `role`. Outside the role's phase (it time-shares GPUs that another
   * phase holds now) nothing onloads: only the hold of an operator drain is lifted, and the model comes back with
   * its phase. An operator never onloads a role onto GPUs another phase holds. Both are decided in the manager's
   * turn, so a drain or a phase change queued before this activation is seen, not overtaken. */
  async activateModel(
    role: string,
    model: string,
    tags?: MemoryTag[],
  ): Promise<{ onloaded: boolean; waits_for?: { group: string; phase: string | null; phases: string[] } }> {
    const manager = this.managerOf(role);
    this.intents.modelActivated(role, model);
    const seen: { waiting: ReturnType<LifecycleCoordinator['notResident']> } = { waiting: null };
    const onloaded = await manager.activateModel(model, tags, {
      mayOnload: () => {
        seen.waiting = this.coordinator.notResident(role);
        return seen.waiting === null;
      },
    });
    if (onloaded || seen.waiting === null) return { onloaded };
    const { group, phase, phases } = seen.waiting;
    return { onloaded: false, waits_for: { group, phase, phases } };
  }

  /** An operator's activation of a whole role: 409 `phase_not_resident` outside its phase (see `activateModel`).
   * It lifts the operator's standing drain of the role (not the holds of `drain_model`). */
  async activateRole(role: string, tags?: MemoryTag[]): Promise<void> {
    const manager = this.managerOf(role);
    const waiting = this.coordinator.notResident(role);
    if (waiting !== null)
      throw new UisError({
        code: 'phase_not_resident',
        path: 'role',
        message: `${role} shares GPUs in activation group ${waiting.group}, which ${
          waiting.status === 'held' ? `is in phase ${waiting.phase}` : `is ${waiting.status}`
        }; ${role} onloads with phase ${waiting.phases.join(' or ')}: advance the phase instead`,
        details: waiting,
      });
    this.intents.roleActivated(role);
    await manager.activate(tags);
  }

  /** The manager of a role named by a caller (a path segment, a body field): 404 `unknown_role` at `role` if the
   * name is no role or the role is not configured. */
  managerOf(role: string): InferenceManager {
    return managerOfRole(this.managers, role);
  }

  /** The running router of a router-mode model, or undefined. */
  routerOf(role: Role, model: string) {
    return this.parts.routers.get(role)?.processes[model];
  }

  /** Shuts every manager down (engines stopped, external ones left alone), then the routers, then Ray (what the
   * bridge created in it, and a head this run started), and closes the store. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= stopParts(this.parts);
    return this.stopping;
  }
}

/** Stops what `createControlPlane` started, users before their dependencies; also its cleanup after a failed
 * start (a part that never started is absent). */
export async function stopParts(
  parts: Pick<
    ControlPlaneParts,
    'managers' | 'routers' | 'routerUrls' | 'ray' | 'db' | 'logger' | 'cleanups' | 'holder'
  > & { undeferred?: UndeferredBatches; coordinator?: LifecycleCoordinator; scale?: ScaleOperations },
): Promise<void> {
  for (const off of parts.cleanups.splice(0)) off();
  // Running scale operations stop where they are (what they added is removed) and stay unfinished: the next start
  // resumes them.
  await parts.scale?.stop();
  parts.undeferred?.stop(new UisError({ code: 'service_stopping', message: 'the service is stopping' }));
  // A transition running now fails as its engines stop: it leaves the lease held, not blocked (a clean stop must
  // not make the next start wait for an operator), and is written down before the store closes.
  parts.coordinator?.interrupt();
  await Promise.allSettled([...parts.managers.values()].map((m) => m.shutdown()));
  await parts.coordinator?.settled();
  // The routers after the managers: their shutdown removes the workers first.
  await Promise.allSettled([...parts.routers.values()].map((r) => r.stop()));
  parts.routers.clear();
  for (const urls of parts.routerUrls.values()) for (const k of Object.keys(urls)) delete urls[k];
  await parts.ray?.stop().catch((e: unknown) => {
    parts.logger.error({ err: String(e) }, 'stopping Ray failed');
  });
  // Last: until everything that writes has stopped, no other process may take the database.
  parts.holder?.release();
  parts.db.close();
}
