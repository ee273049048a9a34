import {
  BatchStore,
  DatabaseHolder,
  type Db,
  EventLog,
  ExternalLauncher,
  InferenceManager,
  InMemoryPlacementGroups,
  type Launcher,
  LifecycleCoordinator,
  LocalLauncher,
  type ManagerOptions,
  ModelOperationGuard,
  type ModelRouters,
  OperationLedger,
  openStore,
  type PlacementGroups,
  SimLauncher,
  StorageHealth,
  startModelRouters,
  stopEnginesOfRemovedRoles,
  storageFailure,
  wireDeferredScoring,
} from '@uis/manager';
import { PlacementPlanner } from '@uis/planner';
import { sglangPlanIssues } from '@uis/sglang-engine';
import {
  capabilities,
  configuredRoles,
  type InferenceRoleSpec,
  type LauncherKind,
  type Logger,
  type PlacementPlan,
  RayGatewayConfigSchema,
  type Role,
  roleSpec,
  silentLogger,
  systemClock,
  type UisConfig,
  UisError,
} from '@uis/spec';
import { type AutoscalePolicy, Autoscaler, autoscalePolicies } from './autoscaler.ts';
import { BarrierBoard } from './barrier-board.ts';
import { ControlPlane, type ControlPlaneParts, stopParts } from './control-plane.ts';
import { memoryFromEngines } from './engine-memory-sizes.ts';
import { type StartedRay, startRay } from './launchers/ray.ts';
import { OperatorIntents } from './operator-intents.ts';
import { ScaleOperations } from './scale-operations.ts';
import { ControlPlaneStream } from './stream.ts';
import { UndeferredBatches } from './undeferred-batches.ts';

export interface ControlPlaneOptions {
  config: UisConfig;
  /** A launcher instance, or a kind built here (`external` reads `gateway.external_urls`, `ray` reads
   * `gateway.ray`). Default `sim`. */
  launcher?: Launcher | LauncherKind;
  dbPath?: string;
  managerOptions?: ManagerOptions;
  logger?: Logger;
  /** Deadline of one phase transition. Default 10 min. */
  transitionTimeoutMs?: number;
  /** How often the stream reports batch progress while a batch is scored. Default 1 s. */
  batchProgressMs?: number;
  /** Adoption mode (default `gateway.adopt_engines`): engines outlive a control plane that dies, and this start
   * adopts the ones recorded in the database instead of launching a second set. */
  adoptEngines?: boolean;
  /** Another process took the database over (this one was hung past the holder's bound): stop writing at once.
   * Default: logged only. */
  onDatabaseLost?: (holder: string) => void;
  /** Aborted to cancel the start (SIGTERM while starting): engines still loading stop at once, what started is
   * stopped, and the start rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The built-in autoscaler's policies, ticking every `intervalMs` (default 10 s). Default: the `autoscale`
   * blocks of the config's models (off when none has one). */
  autoscale?: { policies: AutoscalePolicy[]; intervalMs?: number };
}

/** The placement plan of a config, or 400 `invalid_layout` naming every violation. */
export function planOf(config: UisConfig): PlacementPlan {
  const planned = new PlacementPlanner().plan(config);
  // A launch flag a model's SGLang release lacks is a layout violation too: refused before any engine starts.
  const issues = planned.ok ? sglangPlanIssues(config, planned.plan) : [];
  const result = issues.length > 0 ? { ok: false as const, errors: issues } : planned;
  if (!result.ok)
    throw new UisError({
      code: 'invalid_layout',
      path: result.errors[0]?.path,
      message: `the layout is invalid: ${result.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`,
      details: result.errors,
    });
  return result.plan;
}

function buildLauncher(
  kind: Exclude<LauncherKind, 'ray'>,
  config: UisConfig,
  keepEngines: boolean,
): Launcher {
  switch (kind) {
    case 'sim':
      return new SimLauncher({ keepEngines });
    case 'local':
      return new LocalLauncher({ keepEngines });
    case 'external':
      return new ExternalLauncher(config.gateway?.external_urls ?? {});
  }
}

/**
 * Composes and starts everything `uis serve` and `uis demo` run besides HTTP, each part before its users: the
 * plan, the store, Ray (when the launcher is `ray`: nothing else starts if the cluster cannot be reached), the
 * SGLang router of every router-mode model, one InferenceManager per role (all started; all stopped again if one
 * fails), the external engines of the config, each activation group brought to its recorded or first phase, the
 * operator's standing drains and holds re-applied, and the sealed batches of roles without a defer schedule. A
 * failure stops what already started and rethrows.
 */
export async function createControlPlane(opts: ControlPlaneOptions): Promise<ControlPlane> {
  const config = opts.config;
  const logger = opts.logger ?? silentLogger;
  const plan = planOf(config);
  const dbPath = opts.dbPath ?? config.gateway?.db_path ?? ':memory:';
  const adopt = opts.adoptEngines ?? config.gateway?.adopt_engines ?? false;
  if (adopt) checkAdoption(opts.launcher, dbPath);
  const db = openDatabase(dbPath);
  // One writer per database: a second process stops here, before it adopts, launches or writes anything.
  const holder =
    dbPath === ':memory:'
      ? null
      : new DatabaseHolder(db, dbPath, {
          logger,
          ...(opts.onDatabaseLost === undefined ? {} : { onLost: opts.onDatabaseLost }),
        });
  try {
    holder?.claim();
  } catch (e) {
    db.close();
    throw e;
  }
  const events = new EventLog(db);
  const store = new BatchStore(db);
  const base = {
    managers: new Map<Role, InferenceManager>(),
    routers: new Map<Role, ModelRouters>(),
    routerUrls: new Map<Role, Record<string, string>>(),
    ray: null as StartedRay | null,
    db,
    logger,
    holder,
    cleanups: [] as Array<() => void>,
  };
  try {
    const kind = typeof opts.launcher === 'object' ? null : (opts.launcher ?? 'sim');
    // The gateway.ray block had its defaults applied when the config was parsed; `--launcher ray` without one gets
    // the same defaults here.
    if (kind === 'ray')
      base.ray = await startRay(config.gateway?.ray ?? RayGatewayConfigSchema.parse({}), plan, logger);
    opts.signal?.throwIfAborted();
    const launcher: Launcher =
      typeof opts.launcher === 'object'
        ? opts.launcher
        : (base.ray?.runtime.launcher ?? buildLauncher(kind as Exclude<LauncherKind, 'ray'>, config, adopt));
    // On Ray the plan's pools are real placement groups (created and removed only where the plan says the manager
    // owns them); the other launchers run on this host, where a PG is only bookkeeping.
    const pgs: PlacementGroups = base.ray?.runtime.placementGroups ?? new InMemoryPlacementGroups();
    const roles: Partial<Record<Role, InferenceRoleSpec>> = {};
    for (const { role, spec } of configuredRoles(config)) {
      const r = roleSpec(role, spec);
      roles[role] = r;
      if (r.models.some((m) => capabilities(m).needs_router)) {
        const started = await startModelRouters(r);
        base.routers.set(role, started);
        base.routerUrls.set(role, { ...started.routerUrls });
      }
    }
    for (const [role, r] of Object.entries(roles) as Array<[Role, InferenceRoleSpec]>) {
      const routers = base.routers.get(role);
      const urls = base.routerUrls.get(role);
      base.managers.set(
        role,
        new InferenceManager({
          role: r,
          placements: plan.placements,
          pools: plan.pools,
          launcher,
          placementGroups: pgs,
          events,
          store: db,
          adoptEngines: adopt,
          logger,
          ...(routers ? { routers: routers.routers } : {}),
          ...(urls || opts.managerOptions
            ? { options: { ...opts.managerOptions, ...(urls ? { routerUrls: urls } : {}) } }
            : {}),
        }),
      );
    }
    return await startParts(opts, { ...base, config, plan, roles, events, store, launcher });
  } catch (e) {
    await stopParts(base);
    throw e;
  }
}

/** Opens the database file; one that cannot be opened or written is 400 `invalid_db_path` naming the file and
 * SQLite's reason (a read-only file system, a directory without write permission). */
function openDatabase(dbPath: string): Db {
  try {
    return openStore(dbPath);
  } catch (e) {
    if (storageFailure(e) === null) throw e;
    throw new UisError({
      code: 'invalid_db_path',
      path: 'gateway.db_path',
      message: `cannot open the database ${dbPath} for writing: ${e instanceof Error ? e.message : String(e)}`,
      cause: e,
    });
  }
}

/** Adoption needs engines that can outlive this process and a database file that outlives it too. */
function checkAdoption(launcher: ControlPlaneOptions['launcher'], dbPath: string): void {
  const kind = typeof launcher === 'object' ? launcher.kind : (launcher ?? 'sim');
  const adopts =
    typeof launcher === 'object' ? launcher.adopt !== undefined : kind === 'sim' || kind === 'local';
  if (!adopts)
    throw new UisError({
      code: 'adoption_unsupported',
      path: 'gateway.adopt_engines',
      message: `launcher ${kind} cannot keep engines across restarts (only sim and local can); turn adopt_engines off`,
    });
  if (dbPath === ':memory:')
    throw new UisError({
      code: 'adoption_unsupported',
      path: 'gateway.adopt_engines',
      message:
        'adoption keeps its record of the engines in the database: set gateway.db_path (or --db) to a file',
    });
}

type Built = Pick<
  ControlPlaneParts,
  | 'config'
  | 'plan'
  | 'roles'
  | 'managers'
  | 'db'
  | 'events'
  | 'store'
  | 'launcher'
  | 'ray'
  | 'routers'
  | 'routerUrls'
  | 'logger'
  | 'holder'
  | 'cleanups'
>;

/** The coordinator and deferred scoring over the built managers; then every manager starts, the external
 * engines attach and each activation group comes to its phase. */
async function startParts(opts: ControlPlaneOptions, built: Built): Promise<ControlPlane> {
  const { plan, managers, events, store, logger } = built;
  const groups = plan.activation_groups;
  const intents = new OperatorIntents(built.db, managers, events, logger);
  // Without a schedule the coordinator has no group: batches then run as soon as they are sealed.
  const coordinator = new LifecycleCoordinator({
    groups,
    participants: [...managers.values()].map((m) => intents.participant(m)),
    db: built.db,
    events,
    registries: [...managers.values()].map((m) => m.registry),
    logger,
    ...(plan.memory === undefined ? {} : { memory: plan.memory }),
    roleBundles: roleBundles(plan),
    ...(opts.transitionTimeoutMs === undefined ? {} : { transitionTimeoutMs: opts.transitionTimeoutMs }),
  });
  const wired = wireDeferredScoring({
    coordinator,
    store,
    managers: Object.fromEntries(managers),
    phases: groups.flatMap((g) => g.phases),
    runner: { logger, events },
  });
  // (The wiring resumed batches a dead process left running: their staged results are reused on the next run.)
  if (wired.recovered.length > 0) logger.info({ batches: wired.recovered }, 'batches recovered');
  const parts: ControlPlaneParts = {
    ...built,
    coordinator,
    runner: wired.runner,
    undeferred: new UndeferredBatches(wired.runner, store, logger),
    barriers: new BarrierBoard(),
    stream: new ControlPlaneStream(),
    ledger: new OperationLedger(built.db, systemClock, () => afterRestart(coordinator)),
    intents,
    scale: new ScaleOperations(built.db, managers, new ModelOperationGuard(), events, logger, systemClock),
    storage: new StorageHealth(opts.dbPath ?? built.config.gateway?.db_path ?? ':memory:', logger),
  };
  try {
    const unverified = await stopEnginesOfRemovedRoles(built.db, [...managers.keys()], systemClock, logger);
    if (unverified.length > 0)
      logger.error(
        { engines: unverified },
        'recorded engines of removed roles still run and cannot be verified',
      );
    const signal = opts.signal;
    const results = await Promise.allSettled(
      [...managers.values()].map((m) => m.start(signal === undefined ? {} : { signal })),
    );
    signal?.throwIfAborted();
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    for (const { role, spec } of configuredRoles(built.config)) {
      const model = spec.models[0]?.name;
      const m = managers.get(role);
      if (!m || !model) continue;
      for (const url of spec.external_engine_urls ?? []) await m.registerExternal(model, url);
    }
    // Every engine is resident now, as loaded: models the config does not size are sized from what they report.
    const sized = await memoryFromEngines(built.config, plan, managers, logger, planOf);
    if (sized !== null) {
      plan.memory = sized;
      coordinator.useMemory(sized);
    }
    for (const g of groups) {
      signal?.throwIfAborted();
      // A transition the previous process left unfinished resumes when every engine's memory is known.
      if ((await coordinator.recoverAfterRestart({ group: g.name })) === 'resumed') continue;
      const lease = coordinator.lease(g.name);
      // Every engine starts resident: bring the group to its recorded phase (a restart) or its first one. A
      // blocked lease stays blocked: an operator must say which phase really holds the GPUs.
      if (lease.status === 'held')
        await coordinator.initialize({
          group: g.name,
          actor: 'system',
          ...(lease.phase === null ? {} : { phase: lease.phase }),
        });
      else logger.warn({ group: g.name, reason: lease.reason }, 'activation lease is blocked; resolve it');
    }
    // The operator's word outlives a crash: what was held or drained is drained again before anything is served.
    await intents.reapply();
    // Scale operations a crash or stop interrupted run again toward their targets; finished targets come back.
    parts.scale.resume();
  } catch (e) {
    await stopParts(parts);
    throw e;
  }
  feedStream(parts, opts.batchProgressMs ?? 1000);
  const autoscale = opts.autoscale ?? autoscalePolicies(opts.config);
  if (autoscale && autoscale.policies.length > 0) {
    const autoscaler = new Autoscaler(autoscale.policies, managers, parts.scale, events, systemClock, logger);
    autoscaler.start(autoscale.intervalMs ?? 10_000);
    parts.cleanups.push(() => autoscaler.stop());
  }
  const plane = new ControlPlane(parts);
  // Batches sealed before a restart, of roles without a defer schedule, run now.
  for (const role of managers.keys())
    if (!plane.deferred(role))
      for (const b of store.list({ state: 'sealed', role })) parts.undeferred.run(b.id);
  return plane;
}

/** What a caller retrying an operation cut by a restart should do, from the leases now: resolve a lease only when
 * one is blocked; otherwise the service came back by itself and the state shows what the operation did. */
export function afterRestart(coordinator: Pick<LifecycleCoordinator, 'leases'>): string {
  const blocked = coordinator.leases().filter((l) => l.status === 'blocked');
  if (blocked.length > 0)
    return `the activation lease of ${blocked.map((l) => `group ${l.group} is blocked (${l.reason ?? 'no reason recorded'})`).join('; ')}: resolve it (resolve_lease), then retry with a new id`;
  return 'no activation lease is blocked (the service recovered by itself): read the replicas and phases now (list_replicas, list_phases) and retry with a new id if the operation is still wanted';
}

/** Connects the parts' own notifications to the typed stream. */
function feedStream(parts: ControlPlaneParts, batchProgressMs: number): void {
  const { stream } = parts;
  parts.cleanups.push(
    parts.events.subscribe((event) => stream.emit({ type: 'audit', event })),
    parts.barriers.subscribe(() => stream.emit({ type: 'barriers', barriers: parts.barriers.list() })),
    ...[...parts.managers].map(([role, m]) =>
      m.registry.subscribe((snapshot) => stream.emit({ type: 'topology', role, snapshot })),
    ),
  );
  const ticker = setInterval(() => {
    if (stream.size === 0) return;
    // One GROUP BY over the batches table: listing the running batches read each one's sample and result
    // counts (a scan of its results every second on the serving event loop while a large batch scores).
    let running = 0;
    for (const c of parts.store.counts()) if (c.state === 'running') running += c.count;
    if (running > 0) stream.emit({ type: 'batches', running });
  }, batchProgressMs);
  ticker.unref();
  parts.cleanups.push(() => clearInterval(ticker));
}

/** Per activation group, the bundles each role's engines sit on (the coordinator overlaps onloads on GPUs the leaving
 * phase does not use). */
function roleBundles(plan: PlacementPlan): Record<string, Record<string, number[]>> {
  const out: Record<string, Record<string, number[]>> = {};
  for (const p of plan.placements) {
    if (p.activation_group === null) continue;
    const group = out[p.activation_group] ?? {};
    group[p.role] = [...new Set([...(group[p.role] ?? []), ...p.bundle_indices])];
    out[p.activation_group] = group;
  }
  return out;
}
