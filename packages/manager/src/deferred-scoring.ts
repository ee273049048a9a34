import { deriveModelState, SCORER_ROLES } from '@uis/spec';
import { BatchRunner, type BatchRunnerOptions, type ScoringTarget } from './batch-runner.ts';
import type { BatchInfo, BatchStore } from './batch-store.ts';
import type { InferenceManager } from './inference-manager.ts';
import type { LifecycleCoordinator } from './lifecycle-coordinator.ts';

/** Wires deferred batches into the coordinator: when a phase whose residents include a scorer role becomes
 * resident, every sealed batch of that role runs against the role's eligible replicas and is committed (or
 * failed) before the phase counts as reached, so the trainer's barrier opens only after write-back. */
export function wireDeferredScoring(opts: {
  coordinator: LifecycleCoordinator;
  store: BatchStore;
  managers: Partial<Record<string, InferenceManager>>;
  phases: Array<{ name: string; residents: string[] }>;
  runner?: Omit<BatchRunnerOptions, 'store' | 'targets'>;
  /** What to do with batches a previous process left `running`: resume them (staged results kept) at the next
   * scorer phase, or fail them. Default resume. Done once, here, and returned. */
  recover?: 'resume' | 'fail';
}): {
  runner: BatchRunner;
  recovered: Array<{ id: string; action: 'resumed' | 'failed' }>;
  unregister: () => void;
} {
  const recovered = opts.store.recover(opts.recover ?? 'resume');
  /** The scorer model a batch runs on: its own, else the role's default, else the role's only one. */
  const modelOf = (batch: BatchInfo) => {
    const manager = opts.managers[batch.role];
    if (!manager) return undefined;
    const snapshot = manager.registry.snapshot();
    const name = batch.model ?? snapshot.routing?.default_model ?? Object.keys(snapshot.models)[0] ?? '';
    return { manager, name, entry: snapshot.models[name] };
  };
  const targets = (batch: BatchInfo): ScoringTarget[] => {
    const m = modelOf(batch);
    if (!m) return [];
    const served = m.entry?.served_model_name ?? m.name;
    return m.manager
      .eligibleEngines(m.name)
      .map((e) => ({ engineId: e.engineId, servedModelName: served, client: e.engine.client }));
  };
  const whyNoTarget = (batch: BatchInfo): string | undefined => {
    const m = modelOf(batch);
    if (!m) return `no ${batch.role} role is configured`;
    // The manager's own state, not its last publication: a drain that just began is not published yet.
    const live = m.manager.snapshot().models[m.name];
    if (!live) return undefined;
    if (live.held)
      return `model ${m.name} is held: an operator drained it; activate it, then resolve the lease`;
    return `model ${m.name} is ${deriveModelState(live.replicas.map((r) => r.state))}`;
  };
  const runner = new BatchRunner({ ...opts.runner, store: opts.store, targets, whyNoTarget });
  const offs: Array<() => void> = [];
  for (const phase of opts.phases) {
    const roles = SCORER_ROLES.filter((r) => phase.residents.includes(r));
    if (roles.length === 0) continue;
    offs.push(
      opts.coordinator.registerPhaseTask(phase.name, async ({ group, phase, signal }) => {
        for (const role of roles) await runner.runPending(role, signal, { group, phase });
      }),
    );
  }
  return {
    runner,
    recovered,
    unregister: () => {
      for (const off of offs) off();
    },
  };
}
