import { randomUUID } from 'node:crypto';
import {
  type Db,
  type EventLog,
  type InferenceManager,
  type ModelOperationGuard,
  ScaleOperationStore,
  type ScaleStep,
} from '@uis/manager';
import {
  type Clock,
  canTransitionScale,
  isUisError,
  type Logger,
  type Role,
  type ScaleKind,
  type ScaleOperation,
  type ScaleState,
  scaleFinished,
  UisError,
} from '@uis/spec';
import { managerOfRole } from './role-manager.ts';
import {
  type ScaleInInput,
  ScaleInInputSchema,
  type ScaleOutInput,
  ScaleOutInputSchema,
  scaleInRequest,
  scaleModel,
  scaleTarget,
} from './scale-inputs.ts';

const failedText = (failed: ScaleOperation['failed_engines']) =>
  failed.map((f) => `${f.engine_id}: ${f.error}`).join('; ');

/** Why a running operation was aborted. */
const CANCELLED = 'cancelled';
const STOPPING = 'stopping';

export interface ScaleFilter {
  role?: string;
  kind?: ScaleKind;
  status?: ScaleState;
  model_name?: string;
}

/**
 * Scale operations, durable: each is written when accepted and at every step (the `scale_ops` table), runs in the
 * background (the answer is its `request_id` and state, as Relax answers), holds its model against any other
 * fleet operation, and is resumed to its target by the next start when a crash or a stop interrupted it. A
 * model's last finished target is restored after a restart too (the plan only starts the initial replicas).
 */
export class ScaleOperations {
  readonly #store: ScaleOperationStore;
  readonly #running = new Map<string, { ac: AbortController; done: Promise<void> }>();
  #stopping = false;

  constructor(
    db: Db,
    private readonly managers: ReadonlyMap<Role, InferenceManager>,
    /** Shared with the other fleet operations (the weight switch): one per model at a time. */
    readonly guard: ModelOperationGuard,
    private readonly events: EventLog,
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {
    this.#store = new ScaleOperationStore(db);
  }

  /** Accepts a scale-out: refused (4xx, 409) before anything starts; NOOP when the target is met. */
  scaleOut(role: string, raw: ScaleOutInput, actor: string): ScaleOperation {
    const input = ScaleOutInputSchema.parse(raw);
    const manager = managerOfRole(this.managers, role);
    const model = scaleModel(manager, input.model_name);
    const req = scaleTarget(input, 'scale_out');
    this.refuseBusy(manager, model);
    manager.checkScaleOut(model, req);
    const op = {
      ...this.draft('scale_out', role, model, actor, input, { force: false, dry_run: false }),
      partial_success_policy: input.partial_success_policy,
    };
    const now = manager.scaleCount(model).replicas;
    if ('target' in req && req.target <= now)
      return this.put({
        ...op,
        status: 'NOOP',
        message: `${model} has ${now} replicas already (target ${req.target})`,
      });
    return this.start(manager, op);
  }

  /** Accepts a scale-in: the victims are chosen now (400 if they include initial replicas without `force`). A dry
   * run answers them and changes nothing. */
  scaleIn(role: string, raw: ScaleInInput, actor: string): ScaleOperation {
    const input = ScaleInInputSchema.parse(raw);
    const manager = managerOfRole(this.managers, role);
    const model = scaleModel(manager, input.model_name);
    this.refuseBusy(manager, model);
    const victims = manager.scaleInVictims(model, scaleInRequest(input));
    const op = this.draft('scale_in', role, model, actor, input, input);
    if (victims.length === 0)
      return this.put({
        ...op,
        status: 'NOOP',
        message: `${model} has no replica to remove for this request`,
      });
    if (input.dry_run)
      return this.put({
        ...op,
        status: 'COMPLETED',
        engine_ids: victims,
        message: `dry run: would remove ${victims.join(', ')}`,
      });
    return this.start(manager, { ...op, engine_ids: victims });
  }

  get(requestId: string): ScaleOperation {
    const op = this.#store.get(requestId);
    if (!op)
      throw new UisError({
        code: 'unknown_scale_request',
        path: 'request_id',
        message: `no scale operation ${JSON.stringify(requestId)}`,
      });
    return op;
  }

  /** Operations matching `filter`, newest first. */
  list(filter: ScaleFilter = {}): ScaleOperation[] {
    return this.#store
      .list()
      .filter(
        (o) =>
          (filter.role === undefined || o.role === filter.role) &&
          (filter.kind === undefined || o.kind === filter.kind) &&
          (filter.status === undefined || o.status === filter.status) &&
          (filter.model_name === undefined || o.model_name === filter.model_name),
      )
      .reverse();
  }

  /** Cancels a running scale-out: whatever it added is stopped and removed; resolves with its final record. */
  async cancel(requestId: string): Promise<ScaleOperation> {
    const op = this.get(requestId);
    const run = this.#running.get(requestId);
    if (op.kind !== 'scale_out' || scaleFinished(op.status) || !run)
      throw new UisError({
        code: 'scale_not_cancellable',
        path: 'request_id',
        message: `scale operation ${requestId} is ${op.kind === 'scale_in' ? 'a scale-in' : op.status}: only a running scale-out can be cancelled`,
      });
    run.ac.abort(CANCELLED);
    await run.done;
    return this.get(requestId);
  }

  /** Resolves when operation `requestId` is no longer running. */
  async settled(requestId: string): Promise<ScaleOperation> {
    await this.#running.get(requestId)?.done;
    return this.get(requestId);
  }

  /**
   * After a restart, once the engines of the plan run: an operation the previous process left running starts its
   * steps again toward its target (its half-made replicas were stopped by the start: they are in no plan), and a
   * model whose last operation finished is brought back to that operation's target.
   */
  resume(): void {
    const latest = new Map<string, ScaleOperation>();
    for (const op of this.#store.list())
      if (!op.dry_run && op.status !== 'NOOP') latest.set(`${op.role}/${op.model_name}`, op);
    for (const op of latest.values()) {
      const manager = this.managers.get(op.role as Role);
      if (!manager?.spec.models.some((m) => m.name === op.model_name)) continue;
      try {
        if (!scaleFinished(op.status)) {
          this.logger.info(
            { request_id: op.request_id, status: op.status },
            'scale operation resumed after a restart',
          );
          this.start(manager, this.step(op, 'PENDING', { message: 'resumed after a restart' }));
        } else if ((op.status === 'ACTIVE' || op.status === 'COMPLETED') && op.num_replicas > 0) {
          const now = manager.scaleCount(op.model_name).replicas;
          if (now === op.num_replicas) continue;
          const input = { model_name: op.model_name, num_replicas: op.num_replicas, force: op.force };
          this.logger.info(
            { model: op.model_name, target: op.num_replicas, now },
            'scale target restored after a restart',
          );
          if (op.num_replicas > now)
            this.scaleOut(op.role, { model_name: op.model_name, num_replicas: op.num_replicas }, 'system');
          else this.scaleIn(op.role, input, 'system');
        }
      } catch (e) {
        this.logger.error({ request_id: op.request_id, err: String(e) }, 'scale operation could not resume');
        if (!scaleFinished(op.status))
          this.step(op, 'FAILED', { error_message: `could not resume: ${String(e)}` });
      }
    }
  }

  /** Stops running operations without ending them: the next start resumes them. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const runs = [...this.#running.values()];
    for (const r of runs) r.ac.abort(STOPPING);
    await Promise.allSettled(runs.map((r) => r.done));
  }

  /** 409 while another fleet operation holds the model: a scale, or a weight switch (which runs in the manager's
   * operation queue like a scale, so the two never overlap; a scale asked during a switch is refused outright). */
  private refuseBusy(manager: InferenceManager, model: string): void {
    this.guard.refuseIfHeld(manager.role, model);
    if (manager.switching(model))
      throw new UisError({
        code: 'model_operation_in_progress',
        path: 'model_name',
        message: `${manager.role}/${model} is busy: a weight switch is running; scale it once the switch is done`,
      });
  }

  private draft(
    kind: ScaleKind,
    role: string,
    model: string,
    actor: string,
    input: {
      num_replicas: number;
      engine_urls?: string[] | undefined;
      timeout_secs?: number | null | undefined;
    },
    flags: { force: boolean; dry_run: boolean },
  ): ScaleOperation {
    const now = this.clock.now() / 1000;
    return {
      request_id: randomUUID(),
      kind,
      role,
      model_name: model,
      status: 'PENDING',
      num_replicas: input.num_replicas,
      engine_urls: input.num_replicas > 0 ? [] : (input.engine_urls ?? []),
      engine_ids: [],
      failed_engines: [],
      force: flags.force,
      dry_run: flags.dry_run,
      timeout_secs: input.timeout_secs ?? null,
      actor,
      created_at: now,
      updated_at: now,
      error_message: null,
      weight_version: null,
      message: `${kind === 'scale_out' ? 'Scale-out' : 'Scale-in'} request accepted`,
    };
  }

  private put(op: ScaleOperation): ScaleOperation {
    this.#store.put(op);
    this.events.append({
      kind: `scale.${op.status.toLowerCase()}`,
      subject: `${op.role}/${op.model_name}`,
      actor: op.actor,
      data: { request_id: op.request_id, kind: op.kind, engine_ids: op.engine_ids, message: op.message },
    });
    return op;
  }

  /** Moves `op` to `status` through the transition table (a refused move is logged and not written). */
  private step(op: ScaleOperation, status: ScaleState, patch: Partial<ScaleOperation> = {}): ScaleOperation {
    const current = this.#store.get(op.request_id) ?? op;
    if (!canTransitionScale(current.status, status)) {
      this.logger.warn(
        { request_id: op.request_id, from: current.status, to: status },
        'illegal scale transition refused',
      );
      return current;
    }
    return this.put({ ...current, ...patch, status, updated_at: this.clock.now() / 1000 });
  }

  /** Takes the model, writes the operation and runs it in the background. */
  private start(manager: InferenceManager, op: ScaleOperation): ScaleOperation {
    const release = this.guard.acquire(op.role, op.model_name, { kind: op.kind, id: op.request_id });
    let accepted: ScaleOperation;
    try {
      accepted = this.put(op);
    } catch (e) {
      release();
      throw e;
    }
    const ac = new AbortController();
    const done = this.run(manager, accepted, ac).finally(() => {
      release();
      this.#running.delete(op.request_id);
    });
    this.#running.set(op.request_id, { ac, done });
    return accepted;
  }

  private async run(manager: InferenceManager, op: ScaleOperation, ac: AbortController): Promise<void> {
    const timer = new AbortController();
    const onStep = (st: ScaleStep, ids: string[]) => {
      this.step(op, st, {
        engine_ids: ids,
        message: `${st.toLowerCase().replace('_', ' ')}: ${ids.join(', ')}`,
      });
    };
    try {
      if (op.kind === 'scale_out') {
        if (op.timeout_secs !== null)
          this.clock.sleep(op.timeout_secs * 1000, timer.signal).then(
            () => ac.abort(`timed out after ${op.timeout_secs} s`),
            () => undefined,
          );
        const req = scaleTarget(op, 'scale_out');
        const r = await manager.scaleOut(op.model_name, req, {
          signal: ac.signal,
          onStep,
          keepPartial: op.partial_success_policy === 'keep_partial',
        });
        const kept =
          r.failed.length === 0 ? '' : `; failed and removed (keep_partial): ${failedText(r.failed)}`;
        this.step(op, r.added.length === 0 ? 'NOOP' : 'ACTIVE', {
          weight_version: r.weight_version,
          engine_ids: r.added,
          failed_engines: r.failed,
          ...(r.failed.length > 0 ? { error_message: failedText(r.failed) } : {}),
          message: r.added.length === 0 ? 'target already met' : `active: ${r.added.join(', ')}${kept}`,
        });
      } else {
        const r = await manager.scaleIn(op.model_name, scaleInRequest({ ...op, model_name: op.model_name }), {
          ...(op.timeout_secs === null ? {} : { deadlineMs: op.timeout_secs * 1000 }),
          ctl: { onStep },
        });
        this.step(op, 'COMPLETED', {
          failed_engines: r.failed,
          message: `removed ${r.removed.join(', ')}`,
          ...(r.failed.length > 0 ? { error_message: failedText(r.failed) } : {}),
        });
      }
    } catch (e) {
      if (this.#stopping && ac.signal.reason === STOPPING) return;
      const cancelled = ac.signal.aborted && ac.signal.reason === CANCELLED;
      const why =
        ac.signal.aborted && !cancelled ? String(ac.signal.reason) : isUisError(e) ? e.message : String(e);
      const details = isUisError(e)
        ? (e.details as { engines?: ScaleOperation['failed_engines'] } | undefined)
        : undefined;
      this.step(op, cancelled ? 'CANCELLED' : 'FAILED', {
        error_message: cancelled ? null : why,
        failed_engines: details?.engines ?? [],
        message: cancelled ? 'cancelled: every replica it added was stopped' : `failed: ${why}`,
      });
    } finally {
      timer.abort();
    }
  }
}
