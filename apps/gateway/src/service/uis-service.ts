import {
  type BatchRunner,
  BatchStore,
  type Db,
  EventLog,
  ExternalLauncher,
  InferenceManager,
  InMemoryPlacementGroups,
  type Launcher,
  LifecycleCoordinator,
  LocalLauncher,
  type Logger,
  type ManagerOptions,
  openStore,
  SimLauncher,
  silentLogger,
  wireDeferredScoring,
} from '@uis/manager';
import { PlacementPlanner } from '@uis/planner';
import {
  configuredRoles,
  type InferenceRoleSpec,
  type PlacementPlan,
  type Role,
  roleSpec,
  type UisConfig,
  UisError,
} from '@uis/spec';

export type LauncherKind = 'sim' | 'local' | 'external';

export interface UisServiceOptions {
  config: UisConfig;
  /** A launcher instance, or a kind built here (`external` reads `gateway.external_urls`). Default `sim`. */
  launcher?: Launcher | LauncherKind;
  dbPath?: string;
  managerOptions?: ManagerOptions;
  logger?: Logger;
  /** Deadline of one phase transition. Default 10 min. */
  transitionTimeoutMs?: number;
}

function buildLauncher(kind: LauncherKind, config: UisConfig): Launcher {
  switch (kind) {
    case 'sim':
      return new SimLauncher();
    case 'local':
      return new LocalLauncher();
    case 'external':
      return new ExternalLauncher(config.gateway?.external_urls ?? {});
  }
}

/** Everything `uis serve` runs besides HTTP: the plan, one InferenceManager per role, the event log, durable
 * batches, and the LifecycleCoordinator of the config's activation groups (with deferred scoring wired in). */
export class UisService {
  readonly config: UisConfig;
  readonly plan: PlacementPlan;
  readonly roles: Partial<Record<Role, InferenceRoleSpec>>;
  readonly managers = new Map<Role, InferenceManager>();
  readonly db: Db;
  readonly events: EventLog;
  readonly store: BatchStore;
  readonly coordinator: LifecycleCoordinator;
  readonly runner: BatchRunner;
  readonly launcher: Launcher;
  private readonly logger: Logger;
  private started = false;
  private stopping: Promise<void> | null = null;

  constructor(opts: UisServiceOptions) {
    this.config = opts.config;
    this.logger = opts.logger ?? silentLogger;
    const result = new PlacementPlanner().plan(opts.config);
    if (!result.ok)
      throw new UisError({
        code: 'invalid_layout',
        status: 400,
        path: result.errors[0]?.path,
        message: `the layout is invalid: ${result.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`,
        details: result.errors,
      });
    this.plan = result.plan;
    this.launcher =
      typeof opts.launcher === 'object' ? opts.launcher : buildLauncher(opts.launcher ?? 'sim', opts.config);
    this.db = openStore(opts.dbPath ?? opts.config.gateway?.db_path ?? ':memory:');
    this.events = new EventLog(this.db);
    this.store = new BatchStore(this.db);
    this.roles = {};
    const pgs = new InMemoryPlacementGroups();
    for (const { role, spec } of configuredRoles(opts.config)) {
      const r = roleSpec(role, spec);
      this.roles[role] = r;
      this.managers.set(
        role,
        new InferenceManager({
          role: r,
          placements: this.plan.placements,
          pools: this.plan.pools,
          launcher: this.launcher,
          placementGroups: pgs,
          events: this.events,
          logger: this.logger,
          ...(opts.managerOptions ? { options: opts.managerOptions } : {}),
        }),
      );
    }
    const groups = this.plan.activation_groups;
    // Without a schedule the coordinator has no group: batches then run as soon as they are sealed.
    this.coordinator = new LifecycleCoordinator({
      groups,
      participants: [...this.managers.values()],
      db: this.db,
      events: this.events,
      registries: [...this.managers.values()].map((m) => m.registry),
      logger: this.logger,
      ...(opts.transitionTimeoutMs === undefined ? {} : { transitionTimeoutMs: opts.transitionTimeoutMs }),
    });
    const wired = wireDeferredScoring({
      coordinator: this.coordinator,
      store: this.store,
      managers: Object.fromEntries(this.managers),
      phases: groups.flatMap((g) => g.phases),
      runner: { logger: this.logger },
    });
    // (The wiring resumed batches a dead process left running: their staged results are reused on the next run.)
    this.runner = wired.runner;
    if (wired.recovered.length > 0) this.logger.info({ batches: wired.recovered }, 'batches recovered');
  }

  /** The role's placements from the plan. */
  placementsOf(role: Role) {
    return this.plan.placements.filter((p) => p.role === role);
  }

  /** True when a role's batches wait for a phase of an activation group (deferred scoring). */
  deferred(role: string): boolean {
    return this.plan.activation_groups.some((g) => g.phases.some((p) => p.residents.includes(role)));
  }

  /** Starts every manager (in parallel; all are stopped again if one fails), attaches external engines, and brings
   * each activation group to its first phase. */
  async start(): Promise<void> {
    if (this.started) return;
    const managers = [...this.managers.values()];
    const results = await Promise.allSettled(managers.map((m) => m.start()));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) {
      await Promise.allSettled(managers.map((m) => m.shutdown()));
      throw (failed as PromiseRejectedResult).reason;
    }
    for (const { role, spec } of configuredRoles(this.config)) {
      const model = spec.models[0]?.name;
      const m = this.managers.get(role);
      if (!m || !model) continue;
      for (const url of spec.external_engine_urls ?? []) await m.registerExternal(model, url);
    }
    for (const g of this.plan.activation_groups) {
      const lease = this.coordinator.lease(g.name);
      // Every engine starts resident: bring the group to its recorded phase (a restart) or its first one. A
      // blocked lease stays blocked: an operator must say which phase really holds the GPUs.
      if (lease.status === 'held')
        await this.coordinator.initialize({
          group: g.name,
          actor: 'system',
          ...(lease.phase === null ? {} : { phase: lease.phase }),
        });
      else
        this.logger.warn({ group: g.name, reason: lease.reason }, 'activation lease is blocked; resolve it');
    }
    this.started = true;
    // Batches sealed before a restart, of roles without a defer schedule, run now.
    for (const role of this.managers.keys())
      if (!this.deferred(role))
        this.runner.runPending(role).catch((e: unknown) => {
          this.logger.error({ role, err: String(e) }, 'pending batches failed');
        });
  }

  /** Schedules a sealed batch: a role with a defer schedule scores it when its phase is resident, any other role
   * right away. */
  runWhenSealed(batchId: string): void {
    const info = this.store.get(batchId);
    if (this.deferred(info.role)) return;
    this.runner.run(batchId).catch((e: unknown) => {
      this.logger.error({ batch: batchId, err: String(e) }, 'batch run failed');
    });
  }

  /** Shuts every manager down (engines stopped, external ones left alone) and closes the store. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.allSettled([...this.managers.values()].map((m) => m.shutdown()));
      this.db.close();
    })();
    return this.stopping;
  }
}
