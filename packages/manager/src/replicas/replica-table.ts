import type { SGLangEngine } from '@uis/sglang-engine';
import {
  canTransition,
  capabilities,
  type EngineGroupSpec,
  type GroupPlacement,
  type InferenceModelSpec,
  type Logger,
  type ReplicaPlacement,
  type ReplicaState,
  UisError,
} from '@uis/spec';
import { ALL_TAGS, type Audit, type ModelRuntime, type Slot } from './types.ts';

/** The role's models and replicas: lookups, the one replica state guard, the epoch rule and eligibility. */
export class ReplicaTable {
  readonly models = new Map<string, ModelRuntime>();
  readonly #slots = new Map<string, Slot>();

  constructor(
    private readonly role: string,
    private readonly audit: Audit,
    private readonly logger: Logger,
  ) {}

  model(name: string): ModelRuntime {
    const m = this.models.get(name);
    if (!m)
      throw new UisError({
        code: 'unknown_model',
        path: 'model',
        message: `role ${this.role} has no model ${JSON.stringify(name)}; models: ${[...this.models.keys()].join(', ')}`,
      });
    return m;
  }

  slot(engineId: string): Slot {
    const s = this.#slots.get(engineId);
    if (!s)
      throw new UisError({
        code: 'unknown_engine',
        path: 'engine_id',
        message: `no replica ${engineId}`,
      });
    return s;
  }

  find(engineId: string): Slot | undefined {
    return this.#slots.get(engineId);
  }

  /** Whether `s` is still one of the role's replicas (not removed by scale-down, unregistering or rollback). */
  has(s: Slot): boolean {
    return this.#slots.get(s.engineId) === s;
  }

  all(): Slot[] {
    return [...this.#slots.values()];
  }

  slotsOf(model: string): Slot[] {
    return this.all()
      .filter((s) => s.model === model)
      .sort((a, b) => a.index - b.index);
  }

  /** The next free replica index of a model. */
  nextIndex(model: string): number {
    return Math.max(-1, ...this.slotsOf(model).map((s) => s.index)) + 1;
  }

  /** A new replica, `starting`, added to the table. */
  add(
    spec: InferenceModelSpec,
    group: EngineGroupSpec,
    placement: GroupPlacement,
    replica: ReplicaPlacement,
    kind: { external?: boolean; elastic?: boolean } = {},
  ): Slot {
    const slot: Slot = {
      engineId: replica.engine_id,
      index: replica.replica,
      model: spec.name,
      spec,
      group,
      placement,
      replica,
      external: kind.external ?? false,
      elastic: kind.elastic ?? false,
      joining: false,
      state: 'starting',
      epoch: 0,
      engine: null,
      baseUrl: null,
      generation: 0,
      weightVersion: null,
      quarantined: false,
      memory: { released: false, resumed: new Set(ALL_TAGS) },
      health: { failures: 0, restarting: false, restartPending: false, recovery: null },
      router: { url: null, stale: [] },
    };
    this.#slots.set(slot.engineId, slot);
    return slot;
  }

  /** Takes a replica out of the table; async work on it sees its epoch moved. */
  remove(s: Slot): void {
    this.invalidate(s);
    if (this.has(s)) this.#slots.delete(s.engineId);
  }

  /** The epoch rule: every event that ends an incarnation's claim on the slot (death, restart, removal,
   * shutdown) bumps it; async work captured the epoch and drops its result when it moved. */
  invalidate(s: Slot): void {
    s.epoch++;
  }

  /** The one guard: illegal transitions are refused and logged, never applied. */
  setState(s: Slot, to: ReplicaState): boolean {
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

  /** At the model's target weight version (or the model has none to be at). */
  versionOk(s: Slot): boolean {
    const m = this.models.get(s.model);
    if (!m || !capabilities(m.spec).needs_weight_update || m.target === null) return true;
    return s.weightVersion === m.target;
  }

  /** May take traffic directly: ready, regular worker, not quarantined, at the target version. */
  eligible(s: Slot): boolean {
    return (
      s.state === 'ready' &&
      !s.joining &&
      s.baseUrl !== null &&
      s.replica.worker_type === 'regular' &&
      !s.quarantined &&
      this.versionOk(s)
    );
  }

  engineOf(s: Slot): SGLangEngine {
    if (!s.engine)
      throw new UisError({
        code: 'engine_missing',
        path: s.engineId,
        message: `${s.engineId} has no engine`,
      });
    return s.engine;
  }
}
