import type { MemoryTag, SGLangEngine } from '@uis/sglang-engine';
import { type DrainPolicy, EngineUrlSchema, type InferenceRoleSpec, parseOrThrow, UisError } from '@uis/spec';
import type { KeepTags, OffloadReport, PhaseParticipant } from './coordinator/types.ts';
import { EventLog } from './event-log.ts';
import {
  type AbortRequestInput,
  AbortRequestInputSchema,
  type AbortResult,
  type AbortTargets,
  HeldRequests,
} from './held-requests.ts';
import type { InFlightTracker } from './in-flight.ts';
import { Registry } from './registry.ts';
import { assembleParts } from './replicas/assemble.ts';
import type {
  ElasticScaler,
  ScaleControl,
  ScaleFailure,
  ScaleInRequest,
  ScaleOutRequest,
  ScaleOutResult,
} from './replicas/elastic-scaler.ts';
import type { EnginePool } from './replicas/engine-pool.ts';
import type { ExternalEngines } from './replicas/external-engines.ts';
import type { Health } from './replicas/health.ts';
import type { InferenceManagerInit } from './replicas/init.ts';
import type { MemoryLedger } from './replicas/memory-ledger.ts';
import type { Onload } from './replicas/onload.ts';
import type { OperationQueue } from './replicas/operation-queue.ts';
import type { PublicationProjector } from './replicas/publication.ts';
import type { Recovery } from './replicas/recovery.ts';
import type { ReplicaTable } from './replicas/replica-table.ts';
import type { Residency } from './replicas/residency.ts';
import { ALL_TAGS, type Audit, type ManagerSnapshot } from './replicas/types.ts';
import type { InPlaceResumes, WeightSwitch } from './replicas/weight-switch.ts';
import type { WeightSync } from './replicas/weight-sync.ts';
import { StalenessGuard } from './staleness.ts';
import {
  type WeightSwitchRecord,
  type WeightSwitchRequest,
  WeightSwitchRequestSchema,
} from './weight-switch.ts';
import {
  type WeightUpdateRequest,
  WeightUpdateRequestSchema,
  type WeightUpdateResult,
  weightUpdateKey,
} from './weight-update.ts';

export type {
  ScaleControl,
  ScaleFailure,
  ScaleInRequest,
  ScaleOutRequest,
  ScaleOutResult,
  ScaleStep,
} from './replicas/elastic-scaler.ts';
export type { InferenceManagerInit, ManagerOptions } from './replicas/init.ts';
export type { ManagerSnapshot, RouterRegistrar } from './replicas/types.ts';

/** One manager class for rollout, GenRM and teacher: engine pools per model, replica state machine (the spec's
 * table), health + recovery, weights, onload/offload, router registration, elastic scale and the role's
 * discovery registry. Lifecycle operations are serialized; a concurrent call of the same operation joins it.
 * The work is done by parts that each own their state (`./replicas/`); this class is their one public face. */
export class InferenceManager implements PhaseParticipant {
  readonly role: string;
  readonly registry: Registry;
  readonly inFlight: InFlightTracker;
  /** Which replica holds each rid the gateway has in flight (abort_request), and the abort counts. */
  readonly requests: HeldRequests;
  /** The role spec this manager serves (models, routing, deployment). */
  readonly spec: InferenceRoleSpec;
  readonly #audit: Audit;
  readonly #replicas: ReplicaTable;
  readonly #queue: OperationQueue;
  readonly #publication: PublicationProjector;
  readonly #memory: MemoryLedger;
  readonly #weights: WeightSync;
  readonly #switches: WeightSwitch;
  readonly #health: Health;
  readonly #residency: Residency;
  readonly #recovery: Recovery;
  readonly #onload: Onload;
  readonly #pool: EnginePool;
  readonly #scaler: ElasticScaler;
  readonly #externals: ExternalEngines;
  #shutdown: Promise<void> | null = null;
  /** Numbers each switch's queue key: two switches never join as one operation. */
  #switchCalls = 0;
  #scaleSeq = 0;
  readonly #drainDeadlineMs: number;

  constructor(init: InferenceManagerInit) {
    this.spec = init.role;
    this.role = init.role.role;
    this.requests = new HeldRequests(init.clock);
    const events = init.events ?? (init.store ? new EventLog(init.store) : undefined);
    const audit: Audit = (kind, subject, data, durationMs) =>
      events?.append({ kind, subject, actor: this.role, data, duration_ms: durationMs ?? null });
    this.#audit = audit;
    this.registry = init.registry ?? new Registry({ role: init.role.role, routing: init.role.routing });
    const parts = assembleParts(init, this.registry, audit);
    this.inFlight = parts.inFlight;
    this.#replicas = parts.replicas;
    this.#queue = parts.queue;
    this.#publication = parts.publication;
    this.#memory = parts.memory;
    this.#weights = parts.weights;
    this.#switches = parts.switches;
    this.#health = parts.health;
    this.#residency = parts.residency;
    this.#recovery = parts.recovery;
    this.#onload = parts.onload;
    this.#pool = parts.pool;
    this.#scaler = parts.scaler;
    this.#externals = parts.externals;
    this.#drainDeadlineMs = parts.drainDeadlineMs;
    this.registry.subscribe(new StalenessGuard(this.requests, this.#abortTargets, audit).onPublished);
  }

  // ---- lifecycle ----------------------------------------------------------------------------------------------

  /** Creates owned PGs, launches every replica of the plan in parallel, waits healthy, reads weight versions,
   * registers with routers and publishes. On any failure rolls back exactly what it created; so does `signal`
   * aborting (a stop during the start: the engines launched so far are stopped at once). */
  start(opts: { sleep?: boolean; signal?: AbortSignal } = {}): Promise<OffloadReport | null> {
    const pool = this.#pool;
    const queue = this.#queue;
    const residency = this.#residency;
    const replicas = this.#replicas;
    return queue.run(opts.sleep ? 'start:sleep' : 'start', async () => {
      await pool.start(opts.sleep === true, opts.signal);
      // A role that shares GPUs with the resident phase starts, then releases its memory at once, before the
      // next role starts: only one phase is ever resident (see LifecycleCoordinator.startPhases).
      return opts.sleep
        ? residency.drain([...replicas.models.keys()], { policy: 'abort', deadlineMs: 0 })
        : null;
    });
  }

  /** Onload every sleeping replica (weights first, sync to the target version, then KV cache) -> ready. With
   * `tags`, resumes only those (e.g. `['weights']` to sync weights before the KV cache is back). Models an operator
   * drained stay asleep: a phase change does not undo an operator's drain. */
  activate(tags?: MemoryTag[]): Promise<void> {
    const queue = this.#queue;
    const replicas = this.#replicas;
    return queue.run(`activate:${(tags ?? ALL_TAGS).join(',')}`, () =>
      this.onloadModels(
        [...replicas.models].filter(([, m]) => !m.held).map(([name]) => name),
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
    this.#replicas.model(model);
    return this.#queue.run(`activate:${model}:${(tags ?? ALL_TAGS).join(',')}`, async () => {
      this.releaseHold(model);
      if (opts.mayOnload && !opts.mayOnload()) return false;
      await this.onloadModels([model], tags);
      return true;
    });
  }

  /** Lifts the hold of an operator drain without onloading: the model comes back with its role's next
   * activation (its phase). False when it was not held. */
  releaseHold(model: string): boolean {
    const m = this.#replicas.model(model);
    if (!m.held) return false;
    m.held = false;
    this.#audit('model.released', model, {});
    this.#publication.publish();
    return true;
  }

  /** Publish draining -> wait for in-flight work -> pause/abort by policy -> flush -> release memory ->
   * sleeping. Returns the proof the coordinator needs. With `models`, only those (no hold: they come back with
   * the role's next activation, like a whole-role drain). */
  drain(
    opts: { deadlineMs?: number; policy?: DrainPolicy; models?: readonly string[]; keep?: KeepTags } = {},
  ): Promise<OffloadReport> {
    const { models, ...rest } = opts;
    if (models === undefined)
      return this.#queue.run('drain', () => this.offloadModels([...this.#replicas.models.keys()], rest));
    for (const m of models) this.#replicas.model(m);
    return this.#queue.run(`drain:${JSON.stringify(models)}`, () => this.offloadModels([...models], rest));
  }

  /** The operator's drain of one model: it holds the model asleep across phase changes until `activateModel`. */
  async drainModel(
    model: string,
    opts: { deadlineMs?: number; policy?: DrainPolicy } = {},
  ): Promise<OffloadReport> {
    const m = this.#replicas.model(model);
    return this.#queue.run(`drain:${model}`, () => {
      if (!m.held) {
        m.held = true;
        this.#audit('model.held', model, {});
      }
      return this.offloadModels([model], opts);
    });
  }

  /** Sleep now: abort in-flight work instead of waiting for it. */
  deactivate(): Promise<OffloadReport> {
    return this.#queue.run('deactivate', () =>
      this.offloadModels([...this.#replicas.models.keys()], { policy: 'abort', deadlineMs: 0 }),
    );
  }

  /** Stops health checks, unregisters router workers, stops owned engines (never external ones), deletes the PGs
   * this manager created, publishes every replica dead. Idempotent; a concurrent call joins the first. */
  shutdown(): Promise<void> {
    if (!this.#shutdown)
      this.#shutdown = (async () => {
        // Let a running operation finish its step, then refuse everything after.
        const closing = this.#queue.close();
        const stopping = Promise.all([this.#health.stop(), this.#recovery.stop()]);
        await closing;
        await stopping;
        await this.#pool.shutdown();
        this.requests.close();
        this.#audit('op.shutdown', this.role, {});
      })();
    return this.#shutdown;
  }

  private async onloadModels(models: string[], tags?: MemoryTag[]): Promise<void> {
    this.#pool.requireStarted();
    await this.#onload.activate(models, tags);
  }

  private async offloadModels(
    models: string[],
    opts: { deadlineMs?: number; policy?: DrainPolicy; keep?: KeepTags },
  ): Promise<OffloadReport> {
    this.#pool.requireStarted();
    return this.#residency.drain(models, opts);
  }

  // ---- weights ------------------------------------------------------------------------------------------------

  /** Updates the weights of a non-static model on every resident replica and moves the model's target version.
   * Sleeping replicas are synced when they onload (disk/version updates replay; a distributed update needs the
   * trainer, so such replicas stay ineligible until the next update reaches them). */
  async updateWeights(model: string, request: WeightUpdateRequest): Promise<WeightUpdateResult> {
    const replicas = this.#replicas;
    const weights = this.#weights;
    const queue = this.#queue;
    const pool = this.#pool;
    const m = replicas.model(model);
    weights.refuseStatic(m, 'weight updates');
    const req = parseOrThrow(WeightUpdateRequestSchema, request, 'body', 'invalid_weight_update');
    return queue.run(`weights:${model}:${weightUpdateKey(req)}`, async () => {
      pool.requireStarted();
      return weights.update(m, req);
    });
  }

  /** The fleet weight switch of one model (see WeightSwitch): every resident replica from N to N+1 with a mode,
   * no mixed versions by default, failed replicas quarantined. A second switch of the model while one runs is
   * refused 409 `weight_switch_in_progress`, or waits for it when `queued` (the caller sent an idempotency key). */
  async switchWeights(
    model: string,
    request: WeightSwitchRequest,
    opts: { queued?: boolean } = {},
  ): Promise<WeightSwitchRecord> {
    const m = this.#replicas.model(model);
    this.#weights.refuseStatic(m, 'weight switches');
    const req = parseOrThrow(WeightSwitchRequestSchema, request, 'body', 'invalid_weight_update');
    const switches = this.#switches;
    return switches.exclusive(model, opts.queued === true, () =>
      this.#queue.run(`switch:${model}:${this.#switchCalls++}`, async () => {
        this.#pool.requireStarted();
        return switches.switch(m, req);
      }),
    );
  }

  /** How many in-place weight switches paused a replica so far (see WeightSwitch.inPlaceSwitches). */
  inPlaceSwitches(engineId: string): number {
    return this.#switches.inPlaceSwitches(engineId);
  }

  /** The versions a replica served before each of its in-place switches after the `n`-th (see WeightSwitch). */
  servedBeforeInPlace(engineId: string, n: number): Array<string | null> {
    return this.#switches.servedBeforeInPlace(engineId, n);
  }

  /** The engine's continues after in-place pauses (see WeightSwitch.resumedInPlace). */
  resumedInPlace(engineId: string): InPlaceResumes {
    return this.#switches.resumedInPlace(engineId);
  }

  /** Whether a weight switch of the model runs now. */
  switching(model: string): boolean {
    return this.#switches.running(model);
  }

  /** The model's weight switches, oldest first (the console's timeline). */
  weightSwitches(model: string): WeightSwitchRecord[] {
    this.#replicas.model(model);
    return this.#switches.history(model);
  }

  /** DCS registration (the trainer's weight sync service); static models refuse it. */
  registerDcs(model: string): { model: string; registered: true } {
    this.#weights.registerDcs(this.#replicas.model(model));
    this.#audit('admin.register_dcs', model, {});
    return { model, registered: true };
  }

  // ---- requests -----------------------------------------------------------------------------------------------

  /** `abort_request`: a rid at the replica that holds it, or abort_all at every running replica of a model (or of
   * the role); each aborted caller gets its partial output from its engine (see `HeldRequests.abort`). Not queued
   * behind lifecycle operations: an abort is what a caller sends while one runs. */
  abortRequests(input: AbortRequestInput): Promise<AbortResult> {
    const req = parseOrThrow(AbortRequestInputSchema, input, 'body', 'invalid_body');
    return this.requests.abort(req, this.#abortTargets);
  }

  readonly #abortTargets: AbortTargets = {
    models: (model) =>
      model === undefined ? [...this.#replicas.models.keys()] : [this.#replicas.model(model).spec.name],
    running: (model) =>
      this.#replicas
        .slotsOf(model)
        .filter((s) => s.engine !== null && (s.state === 'ready' || s.state === 'draining'))
        .map((s) => ({ engineId: s.engineId, engine: s.engine as SGLangEngine })),
  };

  // ---- replicas -----------------------------------------------------------------------------------------------

  /** Scales `model` to `replicas` (scale-out or a LIFO scale-in that keeps the plan's own replicas). */
  async scale(model: string, replicas: number): Promise<{ model: string; replicas: number }> {
    const now = this.scaleCount(model).replicas;
    if (replicas > now) await this.scaleOut(model, { target: replicas });
    else if (replicas < now) await this.scaleIn(model, { target: replicas, force: false });
    return { model, replicas };
  }

  /** The replicas a scale of `model` counts now (regular, joined, alive) and how many of them the plan started. */
  scaleCount(model: string): { replicas: number; initial: number } {
    this.#replicas.model(model);
    const members = this.#scaler.members(model);
    return { replicas: members.length, initial: members.filter((s) => !s.elastic).length };
  }

  /** Refuses, before anything starts, a scale-out `model` cannot take: a target on a model that is not elastic, a
   * bad count, or the planner's refusal to place the missing replicas on the bundles the plan reserved. */
  checkScaleOut(model: string, req: ScaleOutRequest): void {
    const m = this.#replicas.model(model);
    if (!('target' in req)) {
      for (const [i, u] of req.urls.entries())
        parseOrThrow(EngineUrlSchema, u, `engine_urls[${i}]`, 'invalid_url');
      return;
    }
    this.checkCount(req.target);
    if (!m.spec.elastic_enabled)
      throw new UisError({
        code: 'not_elastic',
        path: `models.${model}.elastic_enabled`,
        message: `model ${model} is not elastic; set elastic_enabled and reserve bundles with a placeholder group`,
      });
    const missing = req.target - this.#scaler.members(model).length;
    if (missing > 0) this.#scaler.place(m, missing);
  }

  /** Elastic scale-out (see ElasticScaler): new replicas join, prechecked and at the model's weight version, in one
   * topology revision, or none does. Runs in the manager's operation queue. */
  scaleOut(model: string, req: ScaleOutRequest, ctl: ScaleControl = {}): Promise<ScaleOutResult> {
    this.checkScaleOut(model, req);
    const m = this.#replicas.model(model);
    return this.#queue.run(`scale_out:${model}:${JSON.stringify(req)}:${this.#scaleSeq++}`, async () => {
      this.#pool.requireStarted();
      return this.#scaler.scaleOut(m, req, ctl);
    });
  }

  /** The engines a scale-in of `model` would remove now, newest first (refused as the scale-in would be). */
  scaleInVictims(model: string, req: ScaleInRequest): string[] {
    if ('target' in req) this.checkCount(req.target);
    return this.#scaler.victims(this.#replicas.model(model), req).map((s) => s.engineId);
  }

  /** Elastic scale-in: drains (up to `deadlineMs`, at once when forced) and removes the LIFO victims. */
  scaleIn(
    model: string,
    req: ScaleInRequest,
    opts: { deadlineMs?: number; ctl?: ScaleControl } = {},
  ): Promise<{ removed: string[]; failed: ScaleFailure[] }> {
    this.scaleInVictims(model, req);
    const m = this.#replicas.model(model);
    return this.#queue.run(`scale_in:${model}:${JSON.stringify(req)}:${this.#scaleSeq++}`, async () => {
      this.#pool.requireStarted();
      const victims = this.#scaler.victims(m, req);
      const deadlineMs = opts.deadlineMs ?? this.#drainDeadlineMs;
      return this.#scaler.scaleIn(victims, { deadlineMs, force: req.force }, opts.ctl);
    });
  }

  private checkCount(n: number): void {
    if (!Number.isInteger(n) || n < 0)
      throw new UisError({
        code: 'invalid_replicas',
        path: 'replicas',
        message: 'replicas must be an integer >= 0',
      });
  }

  /** Attaches an engine started elsewhere; it is health-checked and published but never killed. */
  async registerExternal(model: string, url: string): Promise<{ engine_id: string }> {
    const m = this.#replicas.model(model);
    // The same rule as the discovery schema (http(s), host, no credentials/query/fragment), checked before the
    // URL can reach a publication.
    const base = new URL(parseOrThrow(EngineUrlSchema, url, 'url', 'invalid_url')).origin;
    return this.#queue.run(`external:${model}:${base}`, () => {
      // An engine attached to a held model would serve what the operator took out of service.
      if (m.held)
        throw new UisError({
          code: 'model_held',
          path: 'model',
          message: `model ${model} is held: an operator drained it; activate it before attaching engines`,
        });
      return this.#externals.attach(m, base);
    });
  }

  async unregisterExternal(engineId: string): Promise<void> {
    const s = this.#replicas.slot(engineId);
    if (!s.external)
      throw new UisError({
        code: 'not_external',
        path: 'engine_id',
        message: `${engineId} was launched by this manager; only external engines can be unregistered`,
      });
    return this.#queue.run(`unexternal:${engineId}`, () => this.#scaler.retire(s, 'unregistered'));
  }

  /** The operator's restart of one replica. A replica of a sleeping model (its GPUs may belong to another phase)
   * is stopped now and relaunched when the model onloads: `{restarted: false}`. Owned engines are killed and
   * relaunched; external ones re-attached. */
  async restartReplica(engineId: string): Promise<{ restarted: boolean }> {
    const s = this.#replicas.slot(engineId);
    return this.#queue.run(`restart:${engineId}`, async () => {
      this.#switches.release(s);
      return { restarted: await this.#recovery.operatorRestart(s) };
    });
  }

  // ---- reads --------------------------------------------------------------------------------------------------

  /** Engines of this role whose GPU memory is not known after a restart, each with the reason: adopted while a
   * memory call was in flight, recorded processes that run but cannot be verified, and engines attached by URL
   * (their memory is not recorded here). Empty when every engine's memory is known. */
  memoryInDoubt(): string[] {
    const external = this.#replicas
      .all()
      .filter((s) => s.external)
      .map((s) => `${s.engineId} (attached by URL: its memory is not recorded here)`);
    return [...this.#memory.inDoubt(), ...external];
  }

  snapshot(): ManagerSnapshot {
    return this.#publication.snapshot({
      started: this.#pool.started,
      shutdown: this.#queue.closed,
      created_pgs: this.#pool.createdPgs(),
    });
  }

  /** Engine of a replica (the gateway proxies through its client). */
  engine(engineId: string): SGLangEngine | null {
    return this.#replicas.find(engineId)?.engine ?? null;
  }

  /** Eligible replicas of a model: ready, regular worker, at the model's weight version. */
  eligibleEngines(model: string): Array<{ engineId: string; baseUrl: string; engine: SGLangEngine }> {
    const replicas = this.#replicas;
    return replicas
      .slotsOf(model)
      .filter((s) => replicas.eligible(s))
      .map((s) => ({ engineId: s.engineId, baseUrl: s.baseUrl as string, engine: s.engine as SGLangEngine }));
  }
}
