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
  type ModelRouters,
  openStore,
  type RouterRegistrar,
  SimLauncher,
  silentLogger,
  startModelRouters,
  wireDeferredScoring,
} from '@uis/manager';
import { PlacementPlanner } from '@uis/planner';
import {
  capabilities,
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

/** A role's routers as its manager sees them from construction on: registrars that forward to the real router
 * once `start()` has started it, and the URL map `start()` fills (the manager reads it when it publishes). */
interface RoleRouters {
  registrars: Record<string, RouterRegistrar>;
  urls: Record<string, string>;
  started: ModelRouters | null;
}

function lateRegistrar(holder: RoleRouters, model: string): RouterRegistrar {
  const target = (): RouterRegistrar => {
    const r = holder.started?.routers[model];
    if (!r)
      throw new UisError({
        code: 'router_not_started',
        status: 503,
        path: `models.${model}.route_mode`,
        message: `the SGLang router of model ${model} is not running (the service is not started)`,
      });
    return r;
  };
  return {
    addWorker: async (req) => target().addWorker(req),
    removeWorker: async (url) => target().removeWorker(url),
  };
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
  /** Roles with `route_mode: sglang_router` models only: their routers are started by `start()`. */
  private readonly roleRouters = new Map<Role, RoleRouters>();
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
      const routed = r.models.filter((m) => capabilities(m).needs_router).map((m) => m.name);
      // The constructor is synchronous and the router processes are not: the manager gets forwarding registrars
      // and the URL map now; start() launches the routers before any manager starts and fills both.
      let holder: RoleRouters | undefined;
      if (routed.length > 0) {
        holder = { registrars: {}, urls: {}, started: null };
        for (const m of routed) holder.registrars[m] = lateRegistrar(holder, m);
        this.roleRouters.set(role, holder);
      }
      const options: ManagerOptions | undefined = holder
        ? { ...opts.managerOptions, routerUrls: holder.urls }
        : opts.managerOptions;
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
          ...(holder ? { routers: holder.registrars } : {}),
          ...(options ? { options } : {}),
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

  /** Starts the SGLang router of every router-mode model, then every manager (in parallel; all, routers
   * included, are stopped again if one fails), attaches external engines, and brings each activation group to its
   * first phase. */
  async start(): Promise<void> {
    if (this.started) return;
    try {
      for (const [role, holder] of this.roleRouters) {
        const spec = this.roles[role];
        if (!spec || holder.started) continue;
        holder.started = await startModelRouters(spec);
        Object.assign(holder.urls, holder.started.routerUrls);
      }
    } catch (e) {
      await this.stopRouters();
      throw e;
    }
    const managers = [...this.managers.values()];
    const results = await Promise.allSettled(managers.map((m) => m.start()));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) {
      await Promise.allSettled(managers.map((m) => m.shutdown()));
      await this.stopRouters();
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

  /** The running router of a router-mode model, or undefined. */
  routerOf(role: Role, model: string) {
    return this.roleRouters.get(role)?.started?.processes[model];
  }

  /** Stops the routers (after the managers: their shutdown removes the workers first) and forgets their URLs. */
  private async stopRouters(): Promise<void> {
    await Promise.allSettled(
      [...this.roleRouters.values()].map(async (h) => {
        const started = h.started;
        h.started = null;
        for (const k of Object.keys(h.urls)) delete h.urls[k];
        await started?.stop();
      }),
    );
  }

  /** Shuts every manager down (engines stopped, external ones left alone), then the routers, and closes the
   * store. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.allSettled([...this.managers.values()].map((m) => m.shutdown()));
      await this.stopRouters();
      this.db.close();
    })();
    return this.stopping;
  }
}
