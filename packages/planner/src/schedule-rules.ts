import {
  type ActivationGroupPlan,
  PRODUCER_ROLE,
  ROLE_CAPABILITIES,
  SCORER_ROLES,
  TRAIN_PHASE_RESIDENT,
} from '@uis/spec';
import { ACTOR_POOL, isColocated, type PlanCtx, type Residency } from './plan-parts.ts';

/** Node names are unique. */
export function checkNodes({ config, inv, fail }: PlanCtx): void {
  config.cluster.nodes.forEach((n, i) => {
    if (inv.byName.get(n.name) !== i)
      fail(
        'duplicate_node',
        `cluster.nodes[${i}].name`,
        `node "${n.name}" is listed twice; give each node a unique name`,
      );
  });
}

/** The schedule: where each role is resident, and the activation groups of the plan. */
export function planSchedule({ config, fail }: PlanCtx): {
  residency: Residency;
  activation_groups: ActivationGroupPlan[];
} {
  const residency = new Map<string, { group: string; phase: string; index: number; path: string }>();
  const activation_groups: ActivationGroupPlan[] = [];
  const groupNames = new Set<string>();
  config.schedule.activation_groups.forEach((g, gi) => {
    const gpath = `schedule.activation_groups[${gi}]`;
    if (groupNames.has(g.name))
      fail('duplicate_activation_group', `${gpath}.name`, `activation group "${g.name}" is defined twice`);
    groupNames.add(g.name);
    if (g.pool !== ACTOR_POOL)
      fail(
        'activation_group_pool',
        `${gpath}.pool`,
        `phases serialize the shared actor pool; set pool to "${ACTOR_POOL}"`,
      );
    const phaseNames = new Set<string>();
    g.phases.forEach((p, pi) => {
      if (phaseNames.has(p.name))
        fail(
          'duplicate_phase',
          `${gpath}.phases[${pi}].name`,
          `phase "${p.name}" appears twice in ${g.name}`,
        );
      phaseNames.add(p.name);
      p.residents.forEach((r, ri) => {
        const rpath = `${gpath}.phases[${pi}].residents[${ri}]`;
        const prev = residency.get(r);
        if (prev) {
          fail(
            'phase_residents_not_disjoint',
            rpath,
            `${r} is already resident in phase "${prev.phase}" (${prev.path}); a role is resident in one phase only`,
          );
          return;
        }
        residency.set(r, { group: g.name, phase: p.name, index: pi, path: rpath });
        if (r !== TRAIN_PHASE_RESIDENT && config.roles[r] === undefined)
          fail(
            'unknown_resident',
            rpath,
            `role ${r} is not configured under roles; remove it from the phase or configure it`,
          );
      });
    });
    activation_groups.push({
      name: g.name,
      pool: g.pool,
      phases: g.phases.map((p) => ({ name: p.name, residents: [...p.residents] })),
    });
  });
  return { residency, activation_groups };
}

/** Role-level rules: deployment mode against training and the schedule, offload, the defer phase order. */
export function checkRoleRules({ config, roles, fail }: PlanCtx, residency: Residency): void {
  const { training } = config;
  for (const { role, spec } of roles) {
    const dpath = `roles.${role}.deployment`;
    const mode = spec.deployment.mode;
    const where = residency.get(role);
    if (mode === 'shared_coresident') {
      fail(
        'shared_coresident_rejected',
        `${dpath}.mode`,
        `roles resident on the same GPUs in the same phase are not supported; use colocated_defer (with a schedule) or colocated_split`,
      );
    }
    if (mode === 'colocated_defer' && ROLE_CAPABILITIES[role].producesSamples) {
      fail(
        'defer_role_not_allowed',
        `${dpath}.mode`,
        `only ${SCORER_ROLES.join(' and ')} can be deferred; place ${role} with colocated_split`,
      );
    }
    if (mode === 'colocated_defer' && training.fully_async) {
      fail(
        'defer_requires_sync',
        `${dpath}.mode`,
        'defer needs synchronous training; set training.fully_async to false or stop deferring',
      );
    } else if (isColocated(mode) && training.fully_async && !training.hybrid) {
      fail(
        'fully_async_colocate',
        `${dpath}.mode`,
        'fully-async training with colocated inference needs training.hybrid: true (or decoupled placement)',
      );
    }
    if (isColocated(mode) && training.actor_gpus <= 0) {
      fail(
        'no_actor_pool',
        'training.actor_gpus',
        `${role} is colocated but the actor pool is empty; set training.actor_gpus`,
      );
    }
    if (isColocated(mode) && !(spec.deployment.offload && training.offload_train)) {
      fail(
        'offload_required',
        spec.deployment.offload ? 'training.offload_train' : `${dpath}.offload`,
        `${role} shares GPUs with training, so both must offload: set roles.${role}.deployment.offload and training.offload_train to true`,
      );
    }
    if (mode === 'colocated_defer' && !where) {
      fail(
        'defer_not_scheduled',
        dpath,
        `a deferred ${role} needs a phase: list it as a resident in schedule.activation_groups`,
      );
    }
    if (where && !isColocated(mode)) {
      fail(
        'scheduled_role_not_colocated',
        where.path,
        `${role} is in a phase but its deployment is ${mode}; only colocated roles take turns on shared GPUs`,
      );
    }
    if (
      where &&
      spec.deployment.activation_group !== undefined &&
      spec.deployment.activation_group !== where.group
    ) {
      fail(
        'activation_mismatch',
        `${dpath}.activation_group`,
        `the schedule puts ${role} in activation group "${where.group}"`,
      );
    }
    if (
      where &&
      spec.deployment.activation_phase !== undefined &&
      spec.deployment.activation_phase !== where.phase
    ) {
      fail(
        'activation_mismatch',
        `${dpath}.activation_phase`,
        `the schedule puts ${role} in phase "${where.phase}"`,
      );
    }
    if (mode === 'colocated_defer' && where && !ROLE_CAPABILITIES[role].producesSamples) {
      const rollout = residency.get(PRODUCER_ROLE);
      if (rollout && rollout.group === where.group && rollout.index >= where.index) {
        fail(
          'defer_phase_order',
          where.path,
          `deferred ${role} must be in a phase after rollout's phase "${rollout.phase}"`,
        );
      }
      const train = residency.get(TRAIN_PHASE_RESIDENT);
      if (train && train.group === where.group && train.index <= where.index) {
        fail(
          'defer_phase_order',
          where.path,
          `deferred ${role} must score before the trainer's phase "${train.phase}"`,
        );
      }
    }
  }
}
