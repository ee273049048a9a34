import { checkEngineSites } from '@uis/planner';
import type { AddWorkerRequest, DrainPolicy, MemoryTag, SGLangEngine } from '@uis/sglang-engine';
import {
  canTransition,
  capabilities,
  type DiscoveryEngine,
  type DiscoveryModel,
  deriveModelState,
  type EngineGroupSpec,
  EngineUrlSchema,
  type GroupPlacement,
  type InferenceModelSpec,
  type InferenceRoleSpec,
  isUisError,
  engineId as makeEngineId,
  type NodePlacement,
  type PoolPlan,
  parseOrThrow,
  type ReplicaPlacement,
  type ReplicaState,
  servedModelName,
  UisError,
} from '@uis/spec';
import { EventLog } from './event-log.ts';
import { InflightTracker } from './inflight.ts';
import { ExternalLauncher, type Launcher, type LaunchRequest } from './launchers.ts';
import type { OffloadReport, PhaseParticipant } from './lifecycle-coordinator.ts';
import type { PlacementGroups } from './placement-groups.ts';
import { Registry } from './registry.ts';
import { type Clock, errorMessage, type Logger, silentLogger, systemClock } from './runtime.ts';
import type { Db } from './store.ts';
import {
  engineWeightUpdate,
  type ParsedWeightUpdate,
  type ReplayableWeightUpdate,
  type WeightUpdateRequest,
  WeightUpdateRequestSchema,
  type WeightUpdateResult,
} from './weight-update.ts';

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
  /** The manager's database: when `events` is not given, the audit log is kept here. */
  store?: Db;
  clock?: Clock;
  logger?: Logger;
  options?: ManagerOptions;
}

type ModelDesire = 'active' | 'sleeping';

interface Slot {
  engineId: string;
  index: number;
  model: string;
  spec: InferenceModelSpec;
  group: EngineGroupSpec;
  placement: GroupPlacement;
  replica: ReplicaPlacement;
  state: ReplicaState;
  generation: number;
  engine: SGLangEngine | null;
  baseUrl: string | null;
  weightVersion: string | null;
  memoryReleased: boolean;
  /** Memory tags resumed while onloading. */
  resumed: Set<MemoryTag>;
  failures: number;
  external: boolean;
  /** Added by `scale` on reserved bundles. */
  elastic: boolean;
  routerUrl: string | null;
  /** URLs the router may still list for this slot (a removal that failed, e.g. when the replica died); removal is
   * retried on every sync, and never keeps the replica's current URL from being added. */
  routerStale: string[];
  restarting: boolean;
  /** Died while its model slept: restarted by the next onload instead of at once. */
  restartPending: boolean;
  /** A background recovery in progress (a drain waits for it, so the replica ends asleep, not half-started). */
  recovery: Promise<void> | null;
  /** Bumped on restart/removal so stale async work (health checks, restarts) notices it lost the slot. */
  epoch: number;
}

interface ModelRuntime {
  spec: InferenceModelSpec;
  target: string | null;
  /** The last weight update that can be replayed on a replica that comes back (disk / version). */
  replay: ReplayableWeightUpdate | null;
  desire: ModelDesire;
  /** An operator drained this model (`drainModel`): role-wide activations (phase changes) skip it until
   * `activateModel`. */
  held: boolean;
  dcsRegistered: boolean;
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

const ALL_TAGS: readonly MemoryTag[] = ['weights', 'kv_cache', 'cuda_graph'];

/** One manager class for rollout, GenRM and teacher: engine pools per model, replica state machine (the spec's
 * table), health + recovery, weights, onload/offload, router registration, elastic scale and the role's
 * discovery registry. Lifecycle operations are serialized; a concurrent call of the same operation joins it. */
export class InferenceManager implements PhaseParticipant {
  readonly role: string;
  readonly registry: Registry;
  readonly inflight: InflightTracker;
  /** The role spec this manager serves (models, routing, deployment). */
  readonly spec: InferenceRoleSpec;
  private readonly launcher: Launcher;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly events: EventLog | undefined;
  private readonly pgs: PlacementGroups | undefined;
  private readonly pools: Record<string, PoolPlan>;
  private readonly routers: Record<string, RouterRegistrar>;
  private readonly opts: Required<Omit<ManagerOptions, 'routerUrls'>> & {
    routerUrls: Record<string, string>;
  };
  private readonly placements: GroupPlacement[];
  private readonly models = new Map<string, ModelRuntime>();
  private readonly slots = new Map<string, Slot>();
  private readonly createdPgs: string[] = [];
  private chain: Promise<unknown> = Promise.resolve();
  private readonly joinable = new Map<string, Promise<unknown>>();
  private started = false;
  private closed = false;
  private shutdownPromise: Promise<void> | null = null;
  private readonly healthController = new AbortController();
  private healthLoop: Promise<void> | null = null;
  private readonly background = new Set<Promise<unknown>>();

  constructor(init: InferenceManagerInit) {
    this.spec = init.role;
    this.role = init.role.role;
    this.launcher = init.launcher;
    this.clock = init.clock ?? systemClock;
    this.logger = init.logger ?? silentLogger;
    this.events = init.events ?? (init.store ? new EventLog(init.store) : undefined);
    this.pgs = init.placementGroups;
    this.pools = init.pools ?? {};
    this.routers = init.routers ?? {};
    const o = init.options ?? {};
    this.opts = {
      startDeadlineMs: o.startDeadlineMs ?? 600_000,
      healthIntervalMs: o.healthIntervalMs ?? 5_000,
      healthTimeoutMs: o.healthTimeoutMs ?? 5_000,
      failuresToDead: o.failuresToDead ?? 3,
      restartBackoffMs: o.restartBackoffMs ?? 1_000,
      restartBackoffMaxMs: o.restartBackoffMaxMs ?? 60_000,
      drainDeadlineMs: o.drainDeadlineMs ?? 120_000,
      drainPolicy: o.drainPolicy ?? 'wait',
      routerUrls: o.routerUrls ?? {},
    };
    this.registry = init.registry ?? new Registry({ role: init.role.role, routing: init.role.routing });
    this.placements = init.placements.filter((p) => p.role === this.role);
    for (const m of init.role.models) {
      if (m.register_dcs && m.weight_source === 'static')
        throw new UisError({
          code: 'static_model_dcs',
          path: `models.${m.name}.register_dcs`,
          message: `model ${m.name} has weight_source static: it cannot register for DCS; drop register_dcs`,
        });
      this.models.set(m.name, {
        spec: m,
        target: null,
        replay: null,
        desire: 'active',
        held: false,
        dcsRegistered: m.register_dcs,
      });
      if (capabilities(m).needs_router && !this.routers[m.name])
        throw new UisError({
          code: 'router_missing',
          path: `models.${m.name}.route_mode`,
          message: `model ${m.name} uses sglang_router: pass a router client (routers.${m.name})`,
        });
    }
    for (const p of this.placements)
      if (!this.models.has(p.model))
        throw new UisError({
          code: 'unknown_model',
          path: `placements.${p.model}`,
          message: `placement names model ${p.model}, which role ${this.role} does not define`,
        });
    this.inflight = new InflightTracker((id) => {
      const s = this.slots.get(id);
      return s !== undefined && this.eligible(s);
    });
  }

  // ---- public lifecycle ---------------------------------------------------------------------------------------

  /** Creates owned PGs, launches every replica of the plan in parallel, waits healthy, reads weight versions,
   * registers with routers and publishes. On any failure rolls back exactly what it created. */
  start(opts: { sleep?: boolean } = {}): Promise<OffloadReport | null> {
    return this.op(opts.sleep ? 'start:sleep' : 'start', async () => {
      await this.doStart(opts.sleep === true);
      // A role that shares GPUs with the resident phase starts, then releases its memory at once, before the
      // next role starts: only one phase is ever resident (see LifecycleCoordinator.startPhases).
      return opts.sleep ? this.doDrain([...this.models.keys()], { policy: 'abort', deadlineMs: 0 }) : null;
    });
  }

  /** Onload every sleeping replica (weights first, sync to the target version, then KV cache) -> ready. With
   * `tags`, resumes only those (e.g. `['weights']` to sync weights before the KV cache is back). Models an operator
   * drained stay asleep: a phase change does not undo an operator's drain. */
  activate(tags?: MemoryTag[]): Promise<void> {
    const key = `activate:${(tags ?? ALL_TAGS).join(',')}`;
    return this.op(key, () =>
      this.doActivate(
        [...this.models].filter(([, m]) => !m.held).map(([name]) => name),
        tags,
      ),
    );
  }

  /** The operator's activation of one model: it lifts the hold of an operator drain, then onloads the model.
   * `mayOnload` is asked in turn, after the operations queued before this one (a drain, a phase change's onload),
   * whether the model's GPUs are its role's now; when not, only the hold is lifted and the model comes back with
   * its role's next activation (its phase). Resolves whether it onloaded. */
  async activateModel(
    model: string,
    tags?: MemoryTag[],
    opts: { mayOnload?: () => boolean } = {},
  ): Promise<boolean> {
    this.model(model);
    return this.op(`activate:${model}:${(tags ?? ALL_TAGS).join(',')}`, async () => {
      this.releaseHold(model);
      if (opts.mayOnload && !opts.mayOnload()) return false;
      await this.doActivate([model], tags);
      return true;
    });
  }

  /** Lifts the hold of an operator drain without onloading: the model comes back with its role's next
   * activation (its phase). False when it was not held. */
  releaseHold(model: string): boolean {
    const m = this.model(model);
    if (!m.held) return false;
    m.held = false;
    this.audit('model.released', model, {});
    this.publish();
    return true;
  }

  /** Publish draining -> wait for in-flight work -> pause/abort by policy -> flush -> release memory ->
   * sleeping. Returns the proof the coordinator needs. */
  drain(opts: { deadlineMs?: number; policy?: DrainPolicy } = {}): Promise<OffloadReport> {
    return this.op('drain', () => this.doDrain([...this.models.keys()], opts));
  }

  /** The operator's drain of one model: it holds the model asleep across phase changes until `activateModel`. */
  async drainModel(
    model: string,
    opts: { deadlineMs?: number; policy?: DrainPolicy } = {},
  ): Promise<OffloadReport> {
    const m = this.model(model);
    return this.op(`drain:${model}`, () => {
      if (!m.held) {
        m.held = true;
        this.audit('model.held', model, {});
      }
      return this.doDrain([model], opts);
    });
  }

  /** Sleep now: abort in-flight work instead of waiting for it. */
  deactivate(): Promise<OffloadReport> {
    return this.op('deactivate', () =>
      this.doDrain([...this.models.keys()], { policy: 'abort', deadlineMs: 0 }),
    );
  }

  /** Stops health checks, unregisters router workers, stops owned engines (never external ones), deletes the PGs
   * this manager created, publishes every replica dead. Idempotent; a concurrent call joins the first. */
  shutdown(): Promise<void> {
    if (!this.shutdownPromise) this.shutdownPromise = this.doShutdown();
    return this.shutdownPromise;
  }

  /** Updates the weights of a non-static model on every resident replica and moves the model's target version.
   * Sleeping replicas are synced when they onload (disk/version updates replay; a distributed update needs the
   * trainer, so such replicas stay ineligible until the next update reaches them). */
  async updateWeights(model: string, request: WeightUpdateRequest): Promise<WeightUpdateResult> {
    const m = this.model(model);
    this.refuseStatic(m, 'weight updates');
    const req = parseOrThrow(WeightUpdateRequestSchema, request, 'body', 'invalid_weight_update');
    return this.op(`weights:${model}:${JSON.stringify(req)}`, () => this.doUpdateWeights(m, req));
  }

  /** DCS registration (the trainer's weight sync service); static models refuse it. */
  registerDcs(model: string): { model: string; registered: true } {
    const m = this.model(model);
    this.refuseStatic(m, 'DCS registration');
    m.dcsRegistered = true;
    this.audit('admin.register_dcs', model, {});
    return { model, registered: true };
  }

  /** Elastic scale: adds replicas on bundles the plan reserved (placeholder groups) after re-checking the
   * placement rules, or removes the newest replicas after draining them. Every step is published. */
  async scale(model: string, replicas: number): Promise<{ model: string; replicas: number }> {
    const m = this.model(model);
    if (!m.spec.elastic_enabled)
      throw new UisError({
        code: 'not_elastic',
        path: `models.${model}.elastic_enabled`,
        message: `model ${model} is not elastic; set elastic_enabled and reserve bundles with a placeholder group`,
      });
    if (!Number.isInteger(replicas) || replicas < 0)
      throw new UisError({
        code: 'invalid_replicas',
        path: 'replicas',
        message: 'replicas must be an integer >= 0',
      });
    return this.op(`scale:${model}:${replicas}`, () => this.doScale(m, replicas));
  }

  /** Attaches an engine started elsewhere; it is health-checked and published but never killed. */
  async registerExternal(model: string, url: string): Promise<{ engine_id: string }> {
    const m = this.model(model);
    // The same rule as the discovery schema (http(s), host, no credentials/query/fragment), checked before the
    // URL can reach a publication.
    const base = new URL(parseOrThrow(EngineUrlSchema, url, 'url', 'invalid_url')).origin;
    return this.op(`external:${model}:${base}`, () => {
      // An engine attached to a held model would serve what the operator took out of service.
      if (m.held)
        throw new UisError({
          code: 'model_held',
          path: 'model',
          message: `model ${model} is held: an operator drained it; activate it before attaching engines`,
        });
      return this.doRegisterExternal(m, base);
    });
  }

  async unregisterExternal(engineId: string): Promise<void> {
    const s = this.slot(engineId);
    if (!s.external)
      throw new UisError({
        code: 'not_external',
        path: 'engine_id',
        message: `${engineId} was launched by this manager; only external engines can be unregistered`,
      });
    return this.op(`unexternal:${engineId}`, async () => {
      await this.retire(s, 'unregistered');
    });
  }

  /** The operator's restart of one replica. A replica of a sleeping model (its GPUs may belong to another phase)
   * is stopped now and relaunched when the model onloads: `{restarted: false}`. Owned engines are killed and
   * relaunched; external ones re-attached. */
  async restartReplica(engineId: string): Promise<{ restarted: boolean }> {
    const s = this.slot(engineId);
    return this.op(`restart:${engineId}`, async () => {
      if (s.state !== 'dead') await this.markDead(s, 'restart requested by operator', false);
      await this.restart(s, false);
      return { restarted: !s.restartPending };
    });
  }

  snapshot(): ManagerSnapshot {
    const models: ManagerSnapshot['models'] = {};
    for (const [name, m] of this.models) {
      models[name] = {
        desire: m.desire,
        held: m.held,
        target_weight_version: m.target,
        replicas: this.slotsOf(name).map((s) => ({
          engine_id: s.engineId,
          state: s.state,
          base_url: s.baseUrl,
          weight_version: s.weightVersion,
          generation: s.generation,
          memory_released: s.memoryReleased,
          external: s.external,
          elastic: s.elastic,
          failures: s.failures,
          pids: s.engine?.pids() ?? [],
        })),
      };
    }
    return {
      role: this.role,
      started: this.started,
      shutdown: this.closed,
      models,
      created_pgs: [...this.createdPgs],
    };
  }

  /** Engine of a replica (the gateway proxies through its client). */
  engine(engineId: string): SGLangEngine | null {
    return this.slots.get(engineId)?.engine ?? null;
  }

  /** Eligible replicas of a model: ready, regular worker, at the model's weight version. */
  eligibleEngines(model: string): Array<{ engineId: string; baseUrl: string; engine: SGLangEngine }> {
    return this.slotsOf(model)
      .filter((s) => this.eligible(s))
      .map((s) => ({ engineId: s.engineId, baseUrl: s.baseUrl as string, engine: s.engine as SGLangEngine }));
  }

  // ---- serialization ------------------------------------------------------------------------------------------

  /** Runs lifecycle operations one at a time; a call whose key is already queued or running joins it. */
  private op<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const existing = this.joinable.get(key);
    if (existing) return existing as Promise<T>;
    if (this.closed && key !== 'shutdown')
      return Promise.reject(
        new UisError({
          code: 'manager_shut_down',
          message: `${this.role} manager is shut down`,
        }),
      );
    const t0 = this.clock.now();
    const run = this.chain.then(async () => {
      if (this.closed)
        throw new UisError({
          code: 'manager_shut_down',
          message: `${this.role} manager is shut down`,
        });
      return fn();
    });
    const tracked = run.then(
      (v) => {
        this.joinable.delete(key);
        this.audit(`op.${key.split(':')[0]}`, key, { ok: true }, this.clock.now() - t0);
        return v;
      },
      (e: unknown) => {
        this.joinable.delete(key);
        this.audit(
          `op.${key.split(':')[0]}`,
          key,
          { ok: false, error: errorMessage(e) },
          this.clock.now() - t0,
        );
        throw e;
      },
    );
    this.chain = tracked.catch(() => undefined);
    this.joinable.set(key, tracked);
    return tracked;
  }

  // ---- start / rollback -----------------------------------------------------------------------------------------

  private async doStart(sleep: boolean): Promise<void> {
    if (this.started) return;
    const createdSlots: Slot[] = [];
    const registered: Slot[] = [];
    const pgsCreatedNow: string[] = [];
    try {
      for (const poolName of new Set(this.placements.map((p) => p.pool))) {
        const pool = this.pools[poolName];
        if (pool?.owner !== 'manager' || !this.pgs) continue;
        if (await this.pgs.exists(pool.pg_name)) continue;
        await this.pgs.create(pool);
        pgsCreatedNow.push(pool.pg_name);
        this.createdPgs.push(pool.pg_name);
        this.audit('pg.created', pool.pg_name, { owner: 'manager' });
      }
      for (const p of this.placements) {
        if (p.worker_type === 'placeholder') continue;
        const m = this.model(p.model);
        const group = m.spec.engine_groups[p.group];
        if (!group)
          throw new UisError({
            code: 'unknown_group',
            path: `${p.model}.engine_groups[${p.group}]`,
            message: 'placement names a group the model lacks',
          });
        for (const r of p.replicas) {
          const slot = this.newSlot(m.spec, group, p, r, false);
          this.slots.set(slot.engineId, slot);
          createdSlots.push(slot);
        }
      }
      this.publish(); // candidates, all starting
      await this.launchAll(createdSlots);
      for (const m of this.models.values()) this.initTarget(m);
      for (const s of createdSlots) this.setState(s, 'ready');
      // Starting to sleep: never registered or published as eligible, the drain that follows publishes.
      if (!sleep) {
        await this.syncRouters(registered);
        this.publish();
      }
      this.started = true;
      this.startHealthLoop();
    } catch (e) {
      this.logger.error({ role: this.role, err: errorMessage(e) }, 'start failed; rolling back');
      await this.rollback(createdSlots, registered, pgsCreatedNow);
      throw new UisError({
        code: 'start_failed',
        relayedStatus: e instanceof UisError ? e.status : undefined,
        message: `${this.role} start failed and was rolled back: ${errorMessage(e)}`,
        cause: e,
        details: { rolled_back: { engines: createdSlots.map((s) => s.engineId), pgs: pgsCreatedNow } },
      });
    }
  }

  /** Starts every slot's engine at once. The first failure cancels the other starts (their engines stop instead
   * of polling for health until the start deadline) and is thrown once every start has ended, so the rollback
   * that follows never races an engine still being launched. */
  private async launchAll(slots: Slot[]): Promise<void> {
    const cancel = new AbortController();
    const results = await Promise.allSettled(
      slots.map((s) =>
        this.launchSlot(s, cancel.signal).catch((e: unknown) => {
          cancel.abort(e);
          throw e;
        }),
      ),
    );
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    const first = failed.find((r) => !isUisError(r.reason) || r.reason.code !== 'engine_start_cancelled');
    const reported = first ?? failed[0];
    if (reported) throw reported.reason;
  }

  private async rollback(slots: Slot[], registered: Slot[], pgs: string[]): Promise<void> {
    await Promise.allSettled(
      registered.map(async (s) => {
        const router = this.routers[s.model];
        if (router && s.routerUrl) await router.removeWorker(s.routerUrl);
      }),
    );
    await Promise.allSettled(slots.map((s) => s.engine?.shutdown(2_000)));
    for (const s of slots) this.slots.delete(s.engineId);
    for (const pg of pgs.reverse()) {
      try {
        await this.pgs?.remove(pg);
        this.audit('pg.removed', pg, { reason: 'rollback' });
      } catch (e) {
        this.logger.error({ pg, err: errorMessage(e) }, 'rollback could not remove placement group');
      }
      const i = this.createdPgs.indexOf(pg);
      if (i >= 0) this.createdPgs.splice(i, 1);
    }
    this.publish();
  }

  private newSlot(
    spec: InferenceModelSpec,
    group: EngineGroupSpec,
    placement: GroupPlacement,
    replica: ReplicaPlacement,
    elastic: boolean,
  ): Slot {
    return {
      engineId: replica.engine_id,
      index: replica.replica,
      model: spec.name,
      spec,
      group,
      placement,
      replica,
      state: 'starting',
      generation: 0,
      engine: null,
      baseUrl: null,
      weightVersion: null,
      memoryReleased: false,
      resumed: new Set(ALL_TAGS),
      failures: 0,
      external: false,
      elastic,
      routerUrl: null,
      routerStale: [],
      restarting: false,
      restartPending: false,
      recovery: null,
      epoch: 0,
    };
  }

  private launchRequest(s: Slot): LaunchRequest {
    return {
      role: this.spec.role,
      model: s.spec,
      group: s.group,
      placement: s.placement,
      replica: s.replica,
      offload: s.placement.offload || this.spec.deployment.offload,
      generation: s.generation,
    };
  }

  /** Creates the engine (launcher), starts it (launch + healthy + flush) and reads its weight version. */
  private async launchSlot(s: Slot, signal?: AbortSignal): Promise<void> {
    // A free port can be taken by another process between the probe and the engine's bind: one more try.
    for (let attempt = 1; ; attempt++) {
      const engine = s.external && s.engine ? s.engine : await this.launcher.create(this.launchRequest(s));
      s.engine = engine;
      s.baseUrl = engine.baseUrl;
      const epoch = s.epoch;
      let up = false;
      engine.onExit((e) => {
        // Before it is up, a failed start is reported by start() itself (and rolled back by the caller).
        if (!up || s.epoch !== epoch || s.engine !== engine) return;
        this.markDead(
          s,
          `process exited (node ${e.nodeRank}, code ${e.code}, signal ${e.signal})`,
          true,
        ).catch((err: unknown) =>
          this.logger.error({ engineId: s.engineId, err: errorMessage(err) }, 'could not mark replica dead'),
        );
      });
      try {
        await engine.start({ deadlineMs: this.opts.startDeadlineMs, ...(signal ? { signal } : {}) });
      } catch (e) {
        if (attempt < 2 && !s.external && /EADDRINUSE|address already in use/i.test(errorMessage(e))) {
          this.logger.warn({ engineId: s.engineId }, 'port taken before the engine bound it; relaunching');
          await engine.shutdown(2_000).catch(() => undefined);
          continue;
        }
        throw e;
      }
      up = true;
      s.weightVersion = await engine.weightVersion();
      s.failures = 0;
      s.memoryReleased = false;
      s.resumed = new Set(ALL_TAGS);
      return;
    }
  }

  /** The model's version at start: what its engines loaded (they all loaded model_path). */
  private initTarget(m: ModelRuntime): void {
    if (m.target !== null) return;
    const versions = this.slotsOf(m.spec.name)
      .map((s) => s.weightVersion)
      .filter((v): v is string => v !== null);
    m.target = versions[0] ?? null;
  }

  // ---- activate / drain -----------------------------------------------------------------------------------------

  private async doActivate(models: string[], tags?: MemoryTag[]): Promise<void> {
    this.requireStarted();
    const want = tags && tags.length > 0 ? ALL_TAGS.filter((t) => tags.includes(t)) : [...ALL_TAGS];
    for (const name of models) this.model(name).desire = 'active';
    const all = models.flatMap((m) => this.slotsOf(m));
    const slots = all.filter((s) => s.state === 'sleeping' || s.state === 'onloading');
    const pending = all.filter((s) => s.state === 'dead' && s.restartPending);
    for (const s of slots) if (s.state === 'sleeping') this.setState(s, 'onloading');
    this.publish();
    const results = await Promise.allSettled([
      ...slots.map((s) => this.onload(s, want)),
      ...pending.map((s) => {
        s.restartPending = false;
        return this.restart(s, false);
      }),
    ]);
    const failed = results.flatMap((r, i) =>
      r.status === 'rejected' ? [`${[...slots, ...pending][i]?.engineId}: ${errorMessage(r.reason)}`] : [],
    );
    await this.syncRouters();
    this.publish();
    if (failed.length > 0)
      throw new UisError({
        code: 'activate_failed',
        message: `onload failed: ${failed.join('; ')}`,
      });
  }

  /** weights -> sync to target -> kv_cache, cuda_graph -> ready. */
  private async onload(s: Slot, want: MemoryTag[]): Promise<void> {
    const engine = this.engineOf(s);
    const m = this.model(s.model);
    try {
      // With nothing to sync (static model, or already at the target) there is no second copy of the weights to
      // make room for: everything resumes in one call. Otherwise weights first, sync, then the KV cache.
      if (want.length === ALL_TAGS.length && s.resumed.size === 0 && !this.needsSync(s, m)) {
        await engine.wake();
        for (const t of ALL_TAGS) s.resumed.add(t);
        s.memoryReleased = false;
      }
      if (want.includes('weights') && !s.resumed.has('weights')) {
        await engine.wake(['weights']);
        s.resumed.add('weights');
        s.memoryReleased = false;
      }
      if (s.resumed.has('weights')) await this.syncWeights(s, m);
      const rest = want.filter((t) => t !== 'weights' && !s.resumed.has(t));
      if (rest.length > 0) {
        await engine.wake(rest);
        for (const t of rest) s.resumed.add(t);
      }
      if (ALL_TAGS.every((t) => s.resumed.has(t))) this.setState(s, 'ready');
    } catch (e) {
      this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'onload failed');
      throw e;
    }
  }

  /** Whether onload must sync weights: a non-static model whose replica is below the target. The version is the
   * one the replica reported before it slept: a sleeping engine's weights do not change. */
  private needsSync(s: Slot, m: ModelRuntime): boolean {
    if (!capabilities(m.spec).needs_weight_update || m.target === null) return false;
    return s.weightVersion !== m.target;
  }

  /** A replica that came up (scale-up, recovery) is ready, and goes straight back to sleep when its model sleeps. */
  private async readyOrAsleep(s: Slot, m: ModelRuntime): Promise<void> {
    this.setState(s, 'ready');
    if (m.desire === 'sleeping') {
      this.setState(s, 'draining');
      await this.offload(s, 0, 'abort');
    }
  }

  /** Brings a replica to the model's target version when the last update can be replayed. */
  private async syncWeights(s: Slot, m: ModelRuntime): Promise<void> {
    if (!capabilities(m.spec).needs_weight_update || m.target === null) return;
    const engine = this.engineOf(s);
    s.weightVersion = await engine.weightVersion();
    if (s.weightVersion === m.target || !m.replay) return;
    const t0 = this.clock.now();
    s.weightVersion = (await engine.updateWeights(engineWeightUpdate(m.replay))).weightVersion;
    this.audit(
      'replica.weights_synced',
      s.engineId,
      { model: s.model, weight_version: s.weightVersion, target: m.target },
      this.clock.now() - t0,
    );
  }

  private async doDrain(
    models: string[],
    opts: { deadlineMs?: number; policy?: DrainPolicy },
  ): Promise<OffloadReport> {
    this.requireStarted();
    for (const name of models) this.model(name).desire = 'sleeping';
    const slots = models.flatMap((m) => this.slotsOf(m));
    const draining = slots.filter((s) => s.state === 'ready' || s.state === 'onloading');
    for (const s of draining) this.setState(s, 'draining');
    // Draining is visible (direct_eligible false, router entry removed) before any work is waited for.
    await this.syncRouters();
    this.publish();
    const deadlineMs = opts.deadlineMs ?? this.opts.drainDeadlineMs;
    const policy = opts.policy ?? this.opts.drainPolicy;
    const recovering = slots.flatMap((s) => (s.recovery ? [s.recovery] : []));
    await Promise.allSettled([
      ...draining.map((s) => this.offload(s, deadlineMs, policy)),
      // A recovery that is launching sees the model's new desire and puts its replica to sleep (or defers the
      // restart); the report waits for it within the drain deadline instead of reporting a half-started replica.
      ...(recovering.length > 0
        ? [this.waitAtMost(Promise.allSettled(recovering), Math.max(deadlineMs, 1_000))]
        : []),
    ]);
    this.publish();
    const engines = slots.map((s) => ({
      engine_id: s.engineId,
      memory_released: s.memoryReleased,
      state: s.state,
    }));
    return { memoryReleased: engines.every((e) => e.memory_released), engines };
  }

  private async offload(s: Slot, deadlineMs: number, policy: DrainPolicy): Promise<void> {
    const engine = this.engineOf(s);
    const t0 = this.clock.now();
    try {
      const report = await engine.drain({
        deadlineMs,
        policy,
        inflight: () => this.inflight.count(s.engineId),
      });
      if (this.offloadEnabled(s)) {
        // drain() already flushed the cache (except in_place); a second flush would only cost a round trip.
        if (report.flushed) await engine.releaseMemory();
        else await engine.sleep();
        s.memoryReleased = true;
        s.resumed.clear();
      }
      if (s.state === 'draining') this.setState(s, 'sleeping');
      this.audit(
        'replica.offloaded',
        s.engineId,
        { ...report, memory_released: s.memoryReleased },
        this.clock.now() - t0,
      );
    } catch (e) {
      this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'drain/offload failed');
      this.audit('replica.offload_failed', s.engineId, { error: errorMessage(e) }, this.clock.now() - t0);
      // `draining` has no way back but `sleeping` or `dead`: an engine that cannot release its memory is
      // declared dead (and, when launched here, stopped, which frees the memory); recovery follows its model.
      await this.markDead(s, `offload failed: ${errorMessage(e)}`, true);
    }
  }

  /** Waits for `p` or `ms`, whichever comes first, leaving no timer behind. */
  private async waitAtMost(p: Promise<unknown>, ms: number): Promise<void> {
    const ac = new AbortController();
    try {
      await Promise.race([p, this.clock.sleep(ms, ac.signal).catch(() => undefined)]);
    } finally {
      ac.abort();
    }
  }

  private offloadEnabled(s: Slot): boolean {
    return s.placement.offload || this.spec.deployment.offload;
  }

  // ---- weights ------------------------------------------------------------------------------------------------

  private refuseStatic(m: ModelRuntime, what: string): void {
    if (m.spec.weight_source === 'static')
      throw new UisError({
        code: 'static_model',
        path: `models.${m.spec.name}.weight_source`,
        message: `model ${m.spec.name} has weight_source static: it refuses ${what}`,
      });
  }

  private async doUpdateWeights(m: ModelRuntime, req: ParsedWeightUpdate): Promise<WeightUpdateResult> {
    this.requireStarted();
    const resident = this.slotsOf(m.spec.name).filter(
      (s) =>
        (s.state === 'ready' || s.state === 'onloading' || s.state === 'draining') &&
        s.resumed.has('weights'),
    );
    if (req.source === 'distributed' && req.action === 'init' && resident.length === 0)
      // Nothing would join the trainer's group: it would wait for a world that never forms.
      throw new UisError({
        code: 'no_resident_replica',
        path: 'body.action',
        message: `no replica of ${m.spec.name} has its weights loaded to join weight group ${req.group_name}${
          m.held
            ? ': an operator drained the model; activate it first'
            : '; activate the model (or its phase) first'
        }`,
      });
    const gpusPerEngine = m.spec.engine_groups[0]?.gpus_per_engine ?? 1;
    const results = await Promise.all(
      resident.map(async (s, i) => {
        const engine = this.engineOf(s);
        try {
          if (req.source === 'distributed' && req.action === 'init') {
            await engine.initWeightsUpdateGroup({
              master_address: req.master_address,
              master_port: req.master_port,
              rank_offset: req.rank_offset + i * gpusPerEngine,
              world_size: req.world_size,
              group_name: req.group_name,
              backend: req.backend,
            });
          } else if (req.source === 'distributed' && req.action === 'destroy') {
            await engine.destroyWeightsUpdateGroup({ group_name: req.group_name });
          } else {
            s.weightVersion = (await engine.updateWeights(engineWeightUpdate(req))).weightVersion;
          }
          return { engine_id: s.engineId, ok: true, weight_version: s.weightVersion };
        } catch (e) {
          s.weightVersion = await engine.weightVersion().catch(() => s.weightVersion);
          return {
            engine_id: s.engineId,
            ok: false,
            weight_version: s.weightVersion,
            error: errorMessage(e),
          };
        }
      }),
    );
    const versioned = 'weight_version' in req ? req.weight_version : null;
    if (resident.length > 0 && results.every((r) => !r.ok)) {
      // Nothing changed anywhere: the target stays, or the model would have no eligible replica at all.
      this.audit('admin.update_weights', m.spec.name, { source: req.source, target: m.target, results });
      throw new UisError({
        code: 'weight_update_failed',
        path: 'body',
        message: `${req.source} weight update of ${m.spec.name} failed on every replica: ${results.map((r) => `${r.engine_id}: ${r.error}`).join('; ')}`,
        details: { engines: results },
      });
    }
    if (versioned !== null) {
      m.target = versioned;
      m.replay = req.source === 'distributed' ? null : req;
    }
    await this.syncRouters();
    this.publish();
    this.audit('admin.update_weights', m.spec.name, { source: req.source, target: m.target, results });
    return { model: m.spec.name, weight_version: m.target, engines: results };
  }

  // ---- elastic scale ------------------------------------------------------------------------------------------

  private async doScale(m: ModelRuntime, n: number): Promise<{ model: string; replicas: number }> {
    this.requireStarted();
    const live = this.slotsOf(m.spec.name).filter((s) => !s.external && s.replica.worker_type === 'regular');
    if (n < live.length) {
      const victims = [...live].sort((a, b) => b.index - a.index).slice(0, live.length - n);
      for (const s of victims) await this.retire(s, 'scaled down');
    } else if (n > live.length) {
      const groupIndex =
        live[0]?.replica.group ?? m.spec.engine_groups.findIndex((g) => g.worker_type === 'regular');
      const group = m.spec.engine_groups[groupIndex];
      const basePlacement = this.placements.find((p) => p.model === m.spec.name && p.group === groupIndex);
      if (!group || !basePlacement)
        throw new UisError({
          code: 'no_regular_group',
          message: `model ${m.spec.name} has no regular engine group`,
        });
      const reserved = this.placements
        .filter((p) => p.model === m.spec.name && p.worker_type === 'placeholder')
        .flatMap((p) => p.bundle_indices);
      const used = new Set(
        [...this.slots.values()].flatMap((s) => s.replica.nodes.flatMap((x) => x.bundle_indices)),
      );
      const free = reserved.filter((b) => !used.has(b));
      const need = (n - live.length) * group.gpus_per_engine;
      if (free.length < need)
        throw new UisError({
          code: 'no_reserved_bundles',
          path: 'replicas',
          message: `scaling ${m.spec.name} to ${n} needs ${need} reserved bundles; ${free.length} are free in its placeholder groups`,
        });
      const added: Slot[] = [];
      let nextIndex = Math.max(-1, ...this.slotsOf(m.spec.name).map((s) => s.index)) + 1;
      for (let k = 0; k < n - live.length; k++) {
        const bundles = free.slice(k * group.gpus_per_engine, (k + 1) * group.gpus_per_engine);
        const replica = this.reservedReplica(m.spec.name, nextIndex++, groupIndex, bundles, basePlacement);
        const slot = this.newSlot(m.spec, group, basePlacement, replica, true);
        this.slots.set(slot.engineId, slot);
        added.push(slot);
      }
      this.publish();
      const results = await Promise.allSettled(added.map((s) => this.launchSlot(s)));
      const failed: string[] = [];
      results.forEach((r, i) => {
        const s = added[i] as Slot;
        if (r.status === 'rejected') {
          failed.push(`${s.engineId}: ${errorMessage(r.reason)}`);
          this.slots.delete(s.engineId);
          s.engine?.shutdown(2_000).catch((e: unknown) => {
            this.logger.error(
              { engineId: s.engineId, err: errorMessage(e) },
              'could not stop failed replica',
            );
          });
        }
      });
      for (const s of added.filter((x) => this.slots.has(x.engineId))) {
        await this.syncWeights(s, m).catch(() => undefined);
        await this.readyOrAsleep(s, m);
      }
      await this.syncRouters();
      this.publish();
      if (failed.length > 0)
        throw new UisError({
          code: 'scale_failed',
          message: `scale up failed: ${failed.join('; ')}`,
        });
    }
    this.audit('admin.scale', m.spec.name, { replicas: n });
    return { model: m.spec.name, replicas: n };
  }

  /** A replica placement on reserved bundles, re-checked with the planner's engine-site rule (one node, ascending
   * contiguous local GPUs) before anything starts. */
  private reservedReplica(
    model: string,
    index: number,
    group: number,
    bundles: number[],
    base: GroupPlacement,
  ): ReplicaPlacement {
    const pool = this.pools[base.pool];
    const sites = bundles.map((b) => {
      const bundle = pool?.bundles.find((x) => x.index === b);
      return {
        bundle: b,
        node: bundle?.node ?? base.replicas[0]?.nodes[0]?.node ?? 'node-0',
        gpu: bundle?.gpu_id ?? b,
      };
    });
    const nodeNames = [...new Set(sites.map((s) => s.node))];
    const nodeGpus = nodeNames.map((n) =>
      pool ? pool.bundles.filter((b) => b.node === n).length : Number.MAX_SAFE_INTEGER,
    );
    const check = checkEngineSites(
      sites.map((s) => ({ node: nodeNames.indexOf(s.node), gpu: s.gpu })),
      nodeGpus,
    );
    if (!check.ok)
      throw new UisError({
        code: check.code,
        path: `${model}.replicas`,
        message: check.message,
      });
    const nodes: NodePlacement[] = check.chunks.map((c, rank) => {
      const gpus = c.gpus;
      return {
        node: nodeNames[c.node] as string,
        node_rank: rank,
        bundle_indices: c.positions.map((p) => (sites[p] as { bundle: number }).bundle),
        gpu_ids: gpus,
        base_gpu_id: gpus[0] ?? 0,
        gpu_id_step: 1,
      };
    });
    return {
      engine_id: makeEngineId(model, index),
      replica: index,
      group,
      worker_type: 'regular',
      nnodes: nodes.length,
      nodes,
    };
  }

  /** Drain one replica (published), stop it (unless external), remove it, publish. */
  private async retire(s: Slot, reason: string): Promise<void> {
    if (s.state === 'ready' || s.state === 'onloading') this.setState(s, 'draining');
    await this.syncRouters();
    this.publish();
    if (s.state === 'draining') {
      try {
        await this.engineOf(s).drain({
          deadlineMs: this.opts.drainDeadlineMs,
          policy: this.opts.drainPolicy,
          inflight: () => this.inflight.count(s.engineId),
        });
      } catch (e) {
        this.logger.warn({ engineId: s.engineId, err: errorMessage(e) }, 'drain before removal failed');
      }
    }
    s.epoch++;
    this.slots.delete(s.engineId);
    await s.engine?.shutdown(5_000);
    await this.syncRouters();
    this.publish();
    this.audit('replica.removed', s.engineId, { reason });
  }

  // ---- external engines -----------------------------------------------------------------------------------------

  private async doRegisterExternal(m: ModelRuntime, url: string): Promise<{ engine_id: string }> {
    for (const s of this.slots.values()) if (s.baseUrl === url) return { engine_id: s.engineId };
    const index = Math.max(-1, ...this.slotsOf(m.spec.name).map((s) => s.index)) + 1;
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
    const placement: GroupPlacement = this.placements.find((p) => p.model === m.spec.name) ?? {
      role: this.spec.role,
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
    const slot = this.newSlot(m.spec, group, placement, replica, false);
    slot.external = true;
    slot.engine = await new ExternalLauncher({ [id]: url }).create(this.launchRequest(slot));
    this.slots.set(id, slot);
    this.publish();
    try {
      await this.launchSlot(slot);
    } catch (e) {
      this.slots.delete(id);
      await slot.engine?.shutdown();
      this.publish();
      throw e;
    }
    if (m.target === null) m.target = slot.weightVersion;
    this.setState(slot, 'ready');
    await this.syncRouters();
    this.publish();
    this.audit('admin.register_external', id, { url });
    return { engine_id: id };
  }

  // ---- health and recovery --------------------------------------------------------------------------------------

  private startHealthLoop(): void {
    const signal = this.healthController.signal;
    this.healthLoop = (async () => {
      while (!signal.aborted) {
        try {
          await this.clock.sleep(this.opts.healthIntervalMs, signal);
        } catch {
          return;
        }
        // One replica's failure to be marked (a publish, an audit write) must not end the loop for the others.
        const checks = await Promise.allSettled([...this.slots.values()].map((s) => this.checkHealth(s)));
        for (const c of checks)
          if (c.status === 'rejected')
            this.logger.error(
              { role: this.role, err: errorMessage(c.reason) },
              'health check handling failed',
            );
      }
    })();
  }

  private async checkHealth(s: Slot): Promise<void> {
    if (s.state === 'dead' || s.state === 'starting' || s.restarting || !s.engine || this.closed) return;
    const epoch = s.epoch;
    const endpoint = `GET ${s.engine.baseUrl}/health`;
    let failure: string | null;
    try {
      const ok = await s.engine.client.health({ timeoutMs: this.opts.healthTimeoutMs });
      failure = ok ? null : `${endpoint}: answered 5xx`;
    } catch (e) {
      failure = errorMessage(e);
    }
    if (s.epoch !== epoch || this.closed) return;
    if (failure === null) {
      s.failures = 0;
      return;
    }
    s.failures++;
    if (s.failures >= this.opts.failuresToDead)
      await this.markDead(s, `${s.failures} failed health checks (last: ${failure})`, true);
  }

  /** Publishes the replica dead and, with fault tolerance, restarts it in the background with backoff. */
  private async markDead(s: Slot, reason: string, recover: boolean): Promise<void> {
    if (s.state === 'dead' || this.closed || !this.slots.has(s.engineId)) return;
    this.setState(s, 'dead');
    s.epoch++;
    this.logger.warn({ engineId: s.engineId, reason }, 'replica dead');
    this.audit('replica.dead', s.engineId, { reason, generation: s.generation });
    await this.syncRouters().catch(() => undefined);
    this.publish();
    // A dead replica this manager launched is stopped at once: its processes are gone, so is its GPU memory, and
    // the coordinator may count it as released. An external engine's memory stays unproven.
    if (!s.external && this.launcher.ownsProcesses && s.engine) {
      try {
        await s.engine.shutdown(2_000);
        s.memoryReleased = true;
      } catch (e) {
        this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'could not stop dead replica');
      }
    }
    if (recover && s.spec.fault_tolerance_enabled) {
      // restart() itself defers to the model's next onload when the model sleeps.
      const p = this.restart(s, true).catch((e) => {
        this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'recovery gave up');
      });
      this.background.add(p);
      s.recovery = p;
      void p.finally(() => {
        this.background.delete(p);
        if (s.recovery === p) s.recovery = null;
      });
    }
  }

  /** dead -> starting (new generation) -> healthy -> weights synced -> ready (eligible only at the target
   * version) -> back to sleep if the model is sleeping. Retries with exponential backoff until it works or the
   * manager shuts down (`retry` false: one attempt, errors thrown). */
  private async restart(s: Slot, retry: boolean): Promise<void> {
    if (s.restarting) return;
    s.restarting = true;
    let backoff = this.opts.restartBackoffMs;
    try {
      for (;;) {
        if (this.closed || !this.slots.has(s.engineId)) return;
        const old = s.engine;
        // Stop what is left of the old incarnation first (never an external engine's processes).
        if (old && !s.external) {
          await old.shutdown(2_000).catch(() => undefined);
          s.engine = null;
        }
        if (this.closed) return;
        // The model went to sleep while this replica was down (or an operator restarts a sleeping one): relaunching
        // now would put it next to the phase that holds the GPUs. The next onload restarts it.
        if (s.state === 'dead' && this.model(s.model).desire === 'sleeping' && this.offloadEnabled(s)) {
          s.restartPending = true;
          this.audit('replica.restart_deferred', s.engineId, { reason: 'model is sleeping' });
          return;
        }
        s.generation++;
        this.setState(s, 'starting');
        this.publish();
        try {
          await this.launchSlot(s);
          const m = this.model(s.model);
          await this.syncWeights(s, m);
          if (this.closed) return;
          await this.readyOrAsleep(s, m);
          await this.syncRouters();
          this.publish();
          this.audit('replica.recovered', s.engineId, {
            generation: s.generation,
            weight_version: s.weightVersion,
          });
          return;
        } catch (e) {
          this.logger.warn({ engineId: s.engineId, err: errorMessage(e), backoff }, 'restart failed');
          if (s.state !== 'dead') this.setState(s, 'dead');
          this.publish();
          if (!retry) throw e;
          try {
            await this.clock.sleep(backoff, this.healthController.signal);
          } catch {
            return;
          }
          backoff = Math.min(backoff * 2, this.opts.restartBackoffMaxMs);
        }
      }
    } finally {
      s.restarting = false;
    }
  }

  // ---- shutdown -------------------------------------------------------------------------------------------------

  private async doShutdown(): Promise<void> {
    // Let a running operation finish its step, then refuse everything after.
    const pending = this.chain;
    this.closed = true;
    this.healthController.abort();
    await pending.catch(() => undefined);
    await this.healthLoop;
    await Promise.allSettled([...this.background]);
    const slots = [...this.slots.values()];
    await Promise.allSettled(
      slots.map(async (s) => {
        const router = this.routers[s.model];
        const urls = [...(s.routerUrl ? [s.routerUrl] : []), ...s.routerStale.splice(0)];
        s.routerUrl = null;
        if (router) await Promise.allSettled(urls.map((u) => router.removeWorker(u)));
      }),
    );
    for (const s of slots) s.epoch++;
    await Promise.allSettled(slots.map((s) => s.engine?.shutdown(5_000)));
    for (const s of slots) if (s.state !== 'dead') this.setState(s, 'dead');
    for (const pg of [...this.createdPgs].reverse()) {
      try {
        await this.pgs?.remove(pg);
        this.audit('pg.removed', pg, { reason: 'shutdown' });
      } catch (e) {
        this.logger.error({ pg, err: errorMessage(e) }, 'could not remove placement group');
      }
    }
    this.createdPgs.length = 0;
    this.publish();
    this.audit('op.shutdown', this.role, {});
  }

  // ---- state, router, publication -------------------------------------------------------------------------------

  /** The one guard: illegal transitions are refused and logged, never applied. */
  private setState(s: Slot, to: ReplicaState): boolean {
    if (s.state === to) return true;
    if (!canTransition(s.state, to)) {
      this.logger.warn({ engineId: s.engineId, from: s.state, to }, 'illegal replica transition refused');
      this.audit('replica.illegal_transition', s.engineId, { from: s.state, to });
      return false;
    }
    this.audit('replica.state', s.engineId, { from: s.state, to, generation: s.generation });
    s.state = to;
    return true;
  }

  private versionOk(s: Slot): boolean {
    const m = this.models.get(s.model);
    if (!m || !capabilities(m.spec).needs_weight_update || m.target === null) return true;
    return s.weightVersion === m.target;
  }

  private eligible(s: Slot): boolean {
    return (
      s.state === 'ready' && s.baseUrl !== null && s.replica.worker_type === 'regular' && this.versionOk(s)
    );
  }

  /** Router entries follow eligibility (PD workers register with their type once ready at the right version). */
  private async syncRouters(record?: Slot[]): Promise<void> {
    const jobs: Array<Promise<void>> = [];
    for (const s of this.slots.values()) {
      const router = this.routers[s.model];
      if (!router) continue;
      const want = s.state === 'ready' && s.baseUrl !== null && this.versionOk(s);
      // An entry that is not the replica's current wanted URL goes: a replica that left service, or the URL of an
      // earlier incarnation whose removal failed (a restarted replica comes back on another port).
      if (s.routerUrl !== null && (!want || s.routerUrl !== s.baseUrl)) {
        s.routerStale.push(s.routerUrl);
        s.routerUrl = null;
      }
      const removals = s.routerStale.splice(0).map((url) =>
        router.removeWorker(url).then(
          () => this.audit('router.removed', s.engineId, { url }),
          (e: unknown) => {
            s.routerStale.push(url);
            throw e;
          },
        ),
      );
      jobs.push(...removals);
      if (want && !s.routerUrl) {
        const url = s.baseUrl as string;
        const wt = s.replica.worker_type === 'placeholder' ? 'regular' : s.replica.worker_type;
        jobs.push(
          // After the removals settle (one may be this very URL), whatever they answered: the replica serves.
          Promise.allSettled(removals)
            .then(() =>
              router.addWorker({
                url,
                worker_type: wt,
                ...(wt === 'prefill' && s.engine?.bootstrapPort !== undefined
                  ? { bootstrap_port: s.engine.bootstrapPort }
                  : {}),
              }),
            )
            .then(() => {
              s.routerUrl = url;
              record?.push(s);
              this.audit('router.added', s.engineId, { url });
            }),
        );
      }
    }
    const results = await Promise.allSettled(jobs);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed && failed.status === 'rejected') throw failed.reason;
  }

  private publish(): void {
    const models: Record<string, DiscoveryModel> = {};
    for (const [name, m] of this.models) {
      const slots = this.slotsOf(name);
      const engines: DiscoveryEngine[] = slots.map((s) => {
        const e: DiscoveryEngine = {
          engine_id: s.engineId,
          base_url: s.baseUrl,
          state: s.state,
          direct_eligible: this.eligible(s),
          weight_version: s.weightVersion,
          group: s.replica.group,
          generation: s.generation,
        };
        if (s.replica.worker_type !== 'placeholder') e.worker_type = s.replica.worker_type;
        return e;
      });
      models[name] = {
        state: deriveModelState(slots.map((s) => s.state)),
        router_url: this.opts.routerUrls[name] ?? null,
        engines,
        weight_version: m.target,
        served_model_name: servedModelName(m.spec),
        ...(m.held ? { held: true } : {}),
      };
    }
    this.registry.publish({ models });
  }

  private audit(kind: string, subject: string, data: Record<string, unknown>, durationMs?: number): void {
    this.events?.append({ kind, subject, actor: this.role, data, duration_ms: durationMs ?? null });
  }

  private requireStarted(): void {
    if (!this.started)
      throw new UisError({
        code: 'manager_not_started',
        message: `${this.role} manager is not started`,
      });
  }

  private model(name: string): ModelRuntime {
    const m = this.models.get(name);
    if (!m)
      throw new UisError({
        code: 'unknown_model',
        path: 'model',
        message: `role ${this.role} has no model ${JSON.stringify(name)}; models: ${[...this.models.keys()].join(', ')}`,
      });
    return m;
  }

  private slot(engineId: string): Slot {
    const s = this.slots.get(engineId);
    if (!s)
      throw new UisError({
        code: 'unknown_engine',
        path: 'engine_id',
        message: `no replica ${engineId}`,
      });
    return s;
  }

  private slotsOf(model: string): Slot[] {
    return [...this.slots.values()].filter((s) => s.model === model).sort((a, b) => a.index - b.index);
  }

  private engineOf(s: Slot): SGLangEngine {
    if (!s.engine)
      throw new UisError({
        code: 'engine_missing',
        path: s.engineId,
        message: `${s.engineId} has no engine`,
      });
    return s.engine;
  }
}
