import type { ConfigRoleInput, Role } from '@uis/spec';
import type { RelaxMode } from './mode.ts';
import type { FlagReader } from './reader.ts';

/** Training roles, counted the way Relax's service plan counts them (relax/core/service_plan.py): the role mode
 * (train-only, rollout-only, colocate, sft, fully-async with or without on-policy, and their PPO forms) names
 * the candidate roles, the algorithm keeps those it runs, and a candidate is placed when `--resource` lists it.
 * Under synchronous colocate only the actor (and a PPO critic) train: reference and actor_fwd are not roles
 * there (the actor computes them), so their `--resource` entries take no GPUs; under fully-async they get
 * dedicated placement groups. A PPO critic with as many GPUs as the actor shares the actor PG when the actor
 * and the rollout share one; otherwise it gets its own. */

type TrainingRole = 'actor' | 'critic' | 'reference' | 'actor_fwd';

const TRAINING: Record<string, readonly string[]> = {
  train_only: ['actor'],
  rollout_only: [],
  colocate: ['actor', 'critic'],
  sft: ['actor'],
  fully_async: ['actor', 'critic', 'reference', 'actor_fwd'],
  fully_async_on_policy: ['actor', 'critic', 'reference'],
};

/** The training roles each algorithm runs (Relax's ALGORITHM_ROLES, training part). */
const ALGORITHM: Record<string, readonly TrainingRole[]> = {
  cispo: ['actor', 'reference', 'actor_fwd'],
  grpo: ['actor', 'reference', 'actor_fwd'],
  gspo: ['actor', 'reference', 'actor_fwd'],
  ppo: ['actor', 'critic', 'reference', 'actor_fwd'],
  sapo: ['actor', 'reference', 'actor_fwd'],
  sft: ['actor'],
};

export interface TrainingInput {
  actor_gpus: number;
  critic_gpus: number;
  reference_gpus: number;
  actor_fwd_gpus: number;
  offload_train: boolean;
  fully_async: boolean;
  hybrid: boolean;
}

function roleMode(flags: FlagReader, mode: RelaxMode, algo: string): keyof typeof TRAINING {
  if (mode.debugRolloutOnly) return 'rollout_only';
  if (mode.debugTrainOnly) return 'train_only';
  if (algo === 'sft') return 'sft';
  const onPolicy = flags.bool('true-on-policy-mode');
  // Relax: PPO keeps the async role set even under --hybrid; other algorithms fold hybrid into colocate.
  if (mode.fullyAsync && (algo === 'ppo' || !mode.hybrid))
    return onPolicy ? 'fully_async_on_policy' : 'fully_async';
  return 'colocate';
}

/** The training block of the config: GPUs per placed training role (0 when Relax does not place it). */
export function trainingOf(flags: FlagReader, mode: RelaxMode): TrainingInput {
  const algo = flags.str('loss-type') === 'sft' ? 'sft' : (flags.str('advantage-estimator') ?? 'grpo');
  const runs = ALGORITHM[algo];
  if (runs === undefined) {
    flags.add(
      'advantage-estimator',
      `algorithm "${algo}" is not one Relax registers; use one of ${Object.keys(ALGORITHM).join(', ')}`,
      'unsupported_algorithm',
    );
  }
  const candidates = new Set(TRAINING[roleMode(flags, mode, algo)]);
  const gpus = (role: TrainingRole) =>
    candidates.has(role) && (runs ?? []).includes(role) ? (mode.resource[role] ?? 0) : 0;
  return {
    actor_gpus: gpus('actor'),
    critic_gpus: gpus('critic'),
    reference_gpus: gpus('reference'),
    actor_fwd_gpus: gpus('actor_fwd'),
    offload_train: mode.offloadTrain,
    fully_async: mode.fullyAsync,
    hybrid: mode.hybrid,
  };
}

/** Relax's colocate check that concerns the actor itself. */
export function checkActorPool(flags: FlagReader, mode: RelaxMode, training: TrainingInput): void {
  if (mode.colocate && training.actor_gpus <= 0) {
    flags.add(
      'resource',
      'colocated placement needs a positive actor GPU count in --resource',
      'contradictory_flags',
    );
  }
}

/** Activation phases for deferred scorers: rollout, then each deferred scorer, then the trainer, on the actor PG. */
export function scheduleOf(mode: RelaxMode, roles: Partial<Record<Role, ConfigRoleInput>>) {
  const phases: Array<{ name: string; residents: Array<Role | 'train'> }> = [];
  if (mode.colocate && mode.deferred.size > 0) {
    if (roles.rollout) phases.push({ name: 'rollout', residents: ['rollout'] });
    for (const role of ['genrm', 'teacher'] as const)
      if (mode.deferred.has(role) && roles[role]) phases.push({ name: `${role}_score`, residents: [role] });
    phases.push({ name: 'train', residents: ['train'] });
  }
  return { activation_groups: phases.length > 0 ? [{ name: 'actor', pool: 'actor', phases }] : [] };
}

/** The pools PlacementPlanner will create for this config, in its order: actor, a critic that does not share
 * it, reference, actor_fwd, GPUs reserved for external engines, then one per decoupled role. */
function poolSizes(
  training: TrainingInput,
  roles: Partial<Record<Role, ConfigRoleInput>>,
): Array<[string, number]> {
  const managed = Object.entries(roles).filter(([, r]) => r && !r.external_engine_urls);
  const anyColocated = managed.some(([, r]) => r?.deployment.mode !== 'decoupled');
  const criticShares = anyColocated && training.critic_gpus === training.actor_gpus;
  const sizes: Record<TrainingRole, number> = {
    actor: training.actor_gpus,
    critic: criticShares ? 0 : training.critic_gpus,
    reference: training.reference_gpus,
    actor_fwd: training.actor_fwd_gpus,
  };
  const out: Array<[string, number]> = Object.entries(sizes);
  for (const [role, spec] of Object.entries(roles))
    if (spec?.external_engine_urls) out.push([role, spec.reserved_gpus ?? 0]);
  for (const [role, spec] of managed) {
    if (spec?.deployment.mode !== 'decoupled') continue;
    out.push([
      role,
      spec.models.reduce((s, m) => s + m.engine_groups.reduce((t, g) => t + g.num_gpus, 0), 0),
    ]);
  }
  return out.filter(([, size]) => size > 0);
}

/** Relax has no inventory: synthesize whole nodes and bind each pool's bundles from the first GPU of a node of its
 * own, as Ray packs each placement group on its own (a pool never starts mid-node behind another one, where an
 * engine that fits a node would straddle two). */
export function inventoryOf(
  mode: RelaxMode,
  training: TrainingInput,
  roles: Partial<Record<Role, ConfigRoleInput>>,
) {
  const bindings: Array<{ pool: string; bundle_index: number; node: string; gpu_id: number }> = [];
  let node = 0;
  for (const [pool, size] of poolSizes(training, roles)) {
    for (let i = 0; i < size; i++)
      bindings.push({
        pool,
        bundle_index: i,
        node: `node-${node + Math.floor(i / mode.perNode)}`,
        gpu_id: i % mode.perNode,
      });
    node += Math.ceil(size / mode.perNode);
  }
  const nodes = Array.from({ length: Math.max(1, node) }, (_, i) => ({
    name: `node-${i}`,
    gpus: mode.perNode,
  }));
  return { nodes, bindings };
}
