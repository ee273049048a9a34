import {
  type BatchRunner,
  BatchStore,
  type Db,
  EventLog,
  ExternalLauncher,
  InferenceManager,
  InMemoryPlacementGroups,
  type Launcher,
  type LaunchRequest,
  LifecycleCoordinator,
  LocalLauncher,
  type Logger,
  type ManagerOptions,
  type ModelRouters,
  openStore,
  type PlacementGroups,
  type RayHead,
  type RayRuntime,
  type RouterRegistrar,
  SIM_BIN,
  SimLauncher,
  silentLogger,
  startModelRouters,
  startRayHead,
  startRayRuntime,
  wireDeferredScoring,
} from '@uis/manager';
import { PlacementPlanner } from '@uis/planner';
import type { MemoryTag, SGLangEngine } from '@uis/sglang-engine';
import {
  capabilities,
  configuredRoles,
  type GpuRef,
  type InferenceRoleSpec,
  type PlacementPlan,
  type PoolPlan,
  type RayGatewayConfig,
  RayGatewayConfigSchema,
  type Role,
  RoleSchema,
  roleSpec,
  type UisConfig,
  UisError,
} from '@uis/spec';

/** Backoff of the reruns of a requeued undeferred batch: 1 s, doubling, at most 30 s apart. */
const UNDEFERRED_RERUN_FIRST_MS = 1_000;
const UNDEFERRED_RERUN_MAX_MS = 30_000;

export type LauncherKind = 'sim' | 'local' | 'external' | 'ray';

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

/** A launcher that knows where its replicas really run (the Ray launcher: what Ray reports). */
interface PlacementReporter {
  actualPlacement(engineId: string): GpuRef[] | undefined;
}
const reportsPlacement = (l: unknown): l is PlacementReporter =>
  typeof (l as Partial<PlacementReporter>).actualPlacement === 'function';

/** `launcher: ray` for `uis serve`: the Ray runtime (bridge, `RayPlacementGroups`, `RayLauncher`) comes to exist in
 * `start()` (connecting, or starting a local head, is asynchronous), while the managers are built in the service's
 * constructor: they get this object's launcher and placement groups, which forward to the runtime once it runs. */
export class RayServiceRuntime {
  runtime: RayRuntime | null = null;
  /** The head this run started (none when `gateway.ray.address` names a cluster). */
  head: RayHead | null = null;
  readonly launcher: Launcher & PlacementReporter;
  readonly placementGroups: PlacementGroups;
  private starting: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;

  constructor(
    readonly settings: RayGatewayConfig,
    private readonly plan: PlacementPlan,
    private readonly logger: Logger,
  ) {
    const need = (): RayRuntime => {
      if (!this.runtime)
        throw new UisError({
          code: 'ray_not_started',
          path: 'gateway.ray',
          message: 'the Ray runtime is not running (the service is not started, or it stopped)',
        });
      return this.runtime;
    };
    this.launcher = {
      kind: 'ray',
      ownsProcesses: true,
      create: async (req: LaunchRequest): Promise<SGLangEngine> => need().launcher.create(req),
      actualPlacement: (engineId) => this.runtime?.launcher.actualPlacement(engineId),
    };
    this.placementGroups = {
      create: async (pool: PoolPlan) => need().placementGroups.create(pool),
      remove: async (pg: string) => need().placementGroups.remove(pg),
      exists: async (pg: string) => need().placementGroups.exists(pg),
    };
  }

  /** Starts a local head when no address is configured, then the bridge. Anything started is stopped again if a
   * later step fails. */
  start(): Promise<void> {
    this.starting ??= this.connect().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  private async connect(): Promise<void> {
    if (this.runtime) return;
    const s = this.settings;
    try {
      let address = s.address;
      if (address === undefined) {
        this.head = await startRayHead({
          python: s.python,
          ...(s.head?.num_gpus === undefined ? {} : { numGpus: s.head.num_gpus }),
          ...(s.head?.num_cpus === undefined ? {} : { numCpus: s.head.num_cpus }),
        });
        address = this.head.address;
        this.logger.info({ address, tempDir: this.head.tempDir }, 'started a local Ray head');
      }
      const command = s.engine_command ?? (s.engine === 'sim' ? [process.execPath, SIM_BIN] : undefined);
      this.runtime = await startRayRuntime({
        plan: this.plan,
        address,
        namespace: s.namespace,
        python: s.python,
        connectTimeoutMs: s.connect_timeout_s * 1000,
        readyTimeoutS: s.pg_ready_timeout_s,
        host: s.engine_host,
        ...(command ? { command } : {}),
        ...(s.engine_args.length > 0 ? { extraArgs: () => [...s.engine_args] } : {}),
        ...(Object.keys(s.env).length > 0 ? { env: s.env } : {}),
        onLog: (line) => {
          if (/error|exception|traceback/i.test(line)) this.logger.warn({ line }, 'ray bridge');
        },
      });
      this.logger.info(
        { address, ray: this.runtime.bridge.rayVersion, nodes: this.runtime.bridge.nodes },
        'connected to Ray',
      );
    } catch (e) {
      await this.teardown();
      throw configPathed(e);
    }
  }

  /** Closes the bridge (it stops any actor of ours still running and removes the PGs it created), then the head
   * this run started. After the managers' shutdown; a start still in progress (a signal while the head starts) is
   * waited for first, so nothing it brings up outlives the stop. Idempotent. */
  async stop(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.teardown();
  }

  private teardown(): Promise<void> {
    this.stopping ??= (async () => {
      const runtime = this.runtime;
      const head = this.head;
      try {
        await runtime?.close();
      } finally {
        await head?.stop();
      }
    })().finally(() => {
      this.runtime = null;
      this.head = null;
      this.stopping = null;
    });
    return this.stopping;
  }
}

/** The bridge names its settings (`address`, `python`); the user wrote them under `gateway.ray`. */
function configPathed(e: unknown): unknown {
  if (!(e instanceof UisError) || (e.path !== 'address' && e.path !== 'python')) return e;
  return new UisError({
    code: e.code,
    relayedStatus: e.status,
    path: `gateway.ray.${e.path}`,
    message: `gateway.ray.${e.path}: ${e.message}`,
    ...(e.details === undefined ? {} : { details: e.details }),
    cause: e,
  });
}

function buildLauncher(kind: Exclude<LauncherKind, 'ray'>, config: UisConfig): Launcher {
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
  /** `launcher: ray` only: the Ray runtime (started by `start()`, stopped by `stop()`). */
  readonly ray: RayServiceRuntime | null;
  private readonly logger: Logger;
  /** Roles with `route_mode: sglang_router` models only: their routers are started by `start()`. */
  private readonly roleRouters = new Map<Role, RoleRouters>();
  private started = false;
  private stopping: Promise<void> | null = null;
  /** Pending reruns of requeued batches of undeferred roles (cleared by `stop()`). */
  private readonly reruns = new Set<NodeJS.Timeout>();
  /** Aborted first by `stop()`: runs of undeferred batches end as interrupted, not as failures of stopped engines. */
  private readonly stopSignal = new AbortController();

  constructor(opts: UisServiceOptions) {
    this.config = opts.config;
    this.logger = opts.logger ?? silentLogger;
    const result = new PlacementPlanner().plan(opts.config);
    if (!result.ok)
      throw new UisError({
        code: 'invalid_layout',
        path: result.errors[0]?.path,
        message: `the layout is invalid: ${result.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`,
        details: result.errors,
      });
    this.plan = result.plan;
    const kind = typeof opts.launcher === 'object' ? null : (opts.launcher ?? 'sim');
    // The gateway.ray block had its defaults applied when the config was parsed; `--launcher ray` without one gets
    // the same defaults here.
    this.ray =
      kind === 'ray'
        ? new RayServiceRuntime(
            opts.config.gateway?.ray ?? RayGatewayConfigSchema.parse({}),
            this.plan,
            this.logger,
          )
        : null;
    this.launcher =
      typeof opts.launcher === 'object'
        ? opts.launcher
        : this.ray
          ? this.ray.launcher
          : buildLauncher(kind as Exclude<LauncherKind, 'ray'>, opts.config);
    this.db = openStore(opts.dbPath ?? opts.config.gateway?.db_path ?? ':memory:');
    this.events = new EventLog(this.db);
    this.store = new BatchStore(this.db);
    this.roles = {};
    // On Ray the plan's pools are real placement groups (created and removed only where the plan says the manager
    // owns them); the other launchers run on this host, where a PG is only bookkeeping.
    const pgs = this.ray ? this.ray.placementGroups : new InMemoryPlacementGroups();
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

  /** Where a replica really runs, when the launcher knows (Ray: the nodes and GPUs Ray gave its bundles); null
   * for launchers that only know the plan (sim, local, external). */
  actualPlacement(engineId: string): GpuRef[] | null {
    return reportsPlacement(this.launcher) ? (this.launcher.actualPlacement(engineId) ?? null) : null;
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
    // Ray first: nothing else has started if the cluster cannot be reached (or its head cannot start).
    await this.ray?.start();
    try {
      for (const [role, holder] of this.roleRouters) {
        const spec = this.roles[role];
        if (!spec || holder.started) continue;
        holder.started = await startModelRouters(spec);
        Object.assign(holder.urls, holder.started.routerUrls);
      }
    } catch (e) {
      await this.stopRouters();
      await this.ray?.stop();
      throw e;
    }
    const managers = [...this.managers.values()];
    const results = await Promise.allSettled(managers.map((m) => m.start()));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) {
      await Promise.allSettled(managers.map((m) => m.shutdown()));
      await this.stopRouters();
      await this.ray?.stop();
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
        for (const b of this.store.list({ state: 'sealed', role })) this.runUndeferred(b.id, 0);
  }

  /** Schedules a sealed batch: a role with a defer schedule scores it when its phase is resident, any other role
   * right away. */
  runWhenSealed(batchId: string): void {
    const info = this.store.get(batchId);
    if (this.deferred(info.role)) return;
    this.runUndeferred(batchId, 0);
  }

  /** Runs a batch of a role without a defer schedule. No scorer phase comes back for it, so a run the engines could
   * not finish (the runner put the batch back to sealed: no replica, engine unreachable) is run again with backoff
   * until it commits or fails, instead of waiting for a restart. */
  private runUndeferred(batchId: string, rerun: number): void {
    this.runner.run(batchId, this.stopSignal.signal).catch((e: unknown) => {
      // Cut short by stop(): the runner logged it and put the batch back for the next start.
      if (this.stopSignal.signal.aborted) return;
      if (this.store.get(batchId).state !== 'sealed') {
        this.logger.error({ batch: batchId, err: String(e) }, 'batch run failed');
        return;
      }
      const delayMs = Math.min(UNDEFERRED_RERUN_MAX_MS, UNDEFERRED_RERUN_FIRST_MS * 2 ** rerun);
      this.logger.warn(
        { batch: batchId, err: String(e), retryInMs: delayMs },
        'batch run failed; rerun scheduled',
      );
      const timer = setTimeout(() => {
        this.reruns.delete(timer);
        if (this.stopping === null) this.runUndeferred(batchId, rerun + 1);
      }, delayMs);
      this.reruns.add(timer);
    });
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

  /** An operator's activation of a whole role: 409 `phase_not_resident` outside its phase (see `activateModel`). */
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
    await manager.activate(tags);
  }

  /** The manager of a role named by a caller (a path segment, a body field): 404 `unknown_role` at `role` if the
   * name is no role or the role is not configured. */
  managerOf(role: string): InferenceManager {
    const r = RoleSchema.safeParse(role);
    const m = r.success ? this.managers.get(r.data) : undefined;
    if (!m)
      throw new UisError({
        code: 'unknown_role',
        path: 'role',
        message: `role ${JSON.stringify(role)} is not configured; roles: ${[...this.managers.keys()].join(', ')}`,
      });
    return m;
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

  /** Shuts every manager down (engines stopped, external ones left alone), then the routers, then Ray (what the
   * bridge created in it, and a head this run started), and closes the store. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      for (const timer of this.reruns) clearTimeout(timer);
      this.reruns.clear();
      this.stopSignal.abort(new UisError({ code: 'service_stopping', message: 'the service is stopping' }));
      // A transition running now fails as its engines stop: it leaves the lease held, not blocked (a clean stop
      // must not make the next start wait for an operator), and is written down before the store closes.
      this.coordinator.interrupt();
      await Promise.allSettled([...this.managers.values()].map((m) => m.shutdown()));
      await this.coordinator.settled();
      await this.stopRouters();
      await this.ray?.stop().catch((e: unknown) => {
        this.logger.error({ err: String(e) }, 'stopping Ray failed');
      });
      this.db.close();
    })();
    return this.stopping;
  }
}
