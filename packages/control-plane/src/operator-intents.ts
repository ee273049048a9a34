import {
  type Db,
  type EventLog,
  type InferenceManager,
  type OperatorIntent,
  type OperatorIntentKind,
  OperatorIntentStore,
  type PhaseParticipant,
} from '@uis/manager';
import { type Logger, type Role, UisError } from '@uis/spec';
import { managerOfRole } from './role-manager.ts';

/** Who gave the word: the command's caller and operation id. */
export interface Speaker {
  actor: string;
  operationId: string | null;
}

/**
 * The operator's standing word about models, kept across crashes. A drain, activation or deactivation is written
 * down when the command is accepted (before its engines move, so a crash mid-drain keeps it), and a restart
 * re-applies it before the service answers:
 * - `drain_model` / `deactivate_model` hold a model asleep across phase changes until `activate_model` (as the
 *   running service does): after a restart the model is drained again, whatever phase the group resumes in.
 * - `drain` / `deactivate` of a role put its models to sleep until the role's next activation: the operator's
 *   `activate`, or the phase schedule onloading the role. That activation forgets the word (the schedule wins, as
 *   it does without a crash); a restart before it drains the role again.
 * - `activate_model` forgets the model's word: it comes back with its phase (and only then: an operator never
 *   onloads a model onto GPUs another phase holds).
 * Records of a role or model the restarted config no longer has are dropped and logged.
 */
export class OperatorIntents {
  readonly #store: OperatorIntentStore;
  /** Off while the restart brings the groups to their phases: those activations must not forget the word. */
  #live = false;

  constructor(
    db: Db,
    private readonly managers: ReadonlyMap<Role, InferenceManager>,
    private readonly events: EventLog,
    private readonly logger: Logger,
  ) {
    this.#store = new OperatorIntentStore(db);
  }

  /** Every standing word, oldest first. */
  list(): OperatorIntent[] {
    return this.#store.list();
  }

  /** `manager` as the coordinator's participant: the phase schedule activating the role forgets a role drain, at
   * the moment the activation is queued (a drain accepted after it runs after it, and stays). */
  participant(manager: InferenceManager): PhaseParticipant {
    return {
      role: manager.role,
      drain: (opts) => manager.drain(opts),
      activate: () => {
        if (this.#live) this.forgetRoleDrain(manager.role, 'the phase schedule activated the role');
        return manager.activate();
      },
      start: (opts) => manager.start(opts),
      memoryInDoubt: () => manager.memoryInDoubt(),
    };
  }

  /** A drain or deactivation of `role` was accepted: every model not held already is drained until the role's
   * next activation. */
  roleDrained(role: string, who: Speaker): void {
    const manager = this.manager(role);
    const held = new Set(
      this.#store
        .list()
        .filter((i) => i.role === role && i.intent === 'held')
        .map((i) => i.model),
    );
    const models = manager.spec.models.map((m) => m.name).filter((m) => !held.has(m));
    this.#store.set(role, models, 'drained', { actor: who.actor, operation_id: who.operationId });
  }

  /** An operator's activation of `role` was accepted. */
  roleActivated(role: string): void {
    this.forgetRoleDrain(role, 'activated by an operator');
  }

  /** `drain_model` or `deactivate_model` was accepted. */
  modelHeld(role: string, model: string, who: Speaker): void {
    this.check(role, model);
    this.#store.set(role, [model], 'held', { actor: who.actor, operation_id: who.operationId });
  }

  /** `activate_model` was accepted. */
  modelActivated(role: string, model: string): void {
    this.check(role, model);
    this.#store.forget(role, model);
  }

  /**
   * After a restart, once every group is in its phase: drops the words about roles and models the config no
   * longer has, then drains again what the operator held or drained (in-flight work cannot exist yet: nothing
   * has been served). From then on the phase schedule's activations forget role drains.
   */
  async reapply(): Promise<void> {
    const byRole = new Map<Role, { held: OperatorIntent[]; drained: OperatorIntent[] }>();
    for (const intent of this.#store.list()) {
      const manager = this.managers.get(intent.role as Role);
      if (!manager?.spec.models.some((m) => m.name === intent.model)) {
        this.#store.forget(intent.role, intent.model);
        this.logger.warn(
          { role: intent.role, model: intent.model, intent: intent.intent },
          'operator intent dropped: the config no longer has this model',
        );
        this.events.append({
          kind: 'operator_intent.dropped',
          subject: `${intent.role}/${intent.model}`,
          actor: 'system',
          data: { ...intent, reason: 'not in the config' },
        });
        continue;
      }
      const entry = byRole.get(manager.role as Role) ?? { held: [], drained: [] };
      entry[intent.intent].push(intent);
      byRole.set(manager.role as Role, entry);
    }
    for (const [role, { held, drained }] of byRole) {
      const manager = this.manager(role);
      for (const h of held) await manager.drainModel(h.model, { policy: 'abort', deadlineMs: 0 });
      if (drained.length > 0)
        await manager.drain({ policy: 'abort', deadlineMs: 0, models: drained.map((d) => d.model) });
      for (const i of [...held, ...drained]) this.reapplied(i);
    }
    this.#live = true;
  }

  private reapplied(i: OperatorIntent): void {
    this.logger.info(
      { role: i.role, model: i.model, intent: i.intent, actor: i.actor, operation_id: i.operation_id },
      `operator intent re-applied: ${i.role}/${i.model} ${i.intent}`,
    );
    this.events.append({
      kind: 'operator_intent.reapplied',
      subject: `${i.role}/${i.model}`,
      actor: 'system',
      data: { ...i },
    });
  }

  private forgetRoleDrain(role: string, why: string): void {
    const n = this.#store.forgetAll(role, 'drained' satisfies OperatorIntentKind);
    if (n > 0) this.logger.info({ role, models: n }, `operator drain of ${role} lifted: ${why}`);
  }

  private manager(role: string): InferenceManager {
    return managerOfRole(this.managers, role);
  }

  private check(role: string, model: string): void {
    const manager = this.manager(role);
    const models = manager.spec.models.map((m) => m.name);
    if (!models.includes(model))
      throw new UisError({
        code: 'unknown_model',
        path: 'model',
        message: `role ${role} has no model ${JSON.stringify(model)}; models: ${models.join(', ')}`,
      });
  }
}
