import { planPlacement } from '@uis/planner';
import {
  configuredRoles,
  type InferenceRoleSpec,
  isUisError,
  type PlacementPlan,
  type Role,
  roleSpec,
  UisConfigSchema,
} from '@uis/spec';

// Test and bench support, exported as `@uis/manager/testing` so the gateway's tests share these layouts.

/** A config object -> the planner's real plan + every role's spec. Throws with every violation when the layout is
 * invalid. */
export function planConfig(config: unknown): {
  plan: PlacementPlan;
  roles: Partial<Record<Role, InferenceRoleSpec>>;
} {
  const parsed = UisConfigSchema.parse(config);
  const result = planPlacement(parsed);
  if (!result.ok)
    throw new Error(`invalid layout: ${result.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`);
  const roles: Partial<Record<Role, InferenceRoleSpec>> = {};
  for (const { role, spec } of configuredRoles(parsed)) roles[role] = roleSpec(role, spec);
  return { plan: result.plan, roles };
}

/** What a call or promise ends with: 'ok', or the code it fails with (a non-UisError as its text). */
export async function outcomeCode(p: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof p === 'function' ? p() : p);
    return 'ok';
  } catch (e) {
    return isUisError(e) ? e.code : String(e);
  }
}

const group = (num_gpus: number, gpus_per_engine: number) => ({ num_gpus, gpus_per_engine });

/** Split layout: rollout, GenRM and teacher on disjoint slices of an 8-GPU actor pool, all resident. */
export function splitConfig(opts: { faultTolerance?: boolean; rolloutSource?: string } = {}) {
  return {
    cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
    training: { actor_gpus: 8, offload_train: true },
    roles: {
      rollout: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: { default_model: 'policy' },
        models: [
          {
            name: 'policy',
            model_path: '/models/policy',
            weight_source: opts.rolloutSource ?? 'disk',
            fault_tolerance_enabled: opts.faultTolerance ?? false,
            engine_groups: [group(4, 2)],
          },
        ],
      },
      genrm: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: { default_model: 'judge' },
        models: [
          {
            name: 'judge',
            model_path: '/models/judge',
            weight_source: 'static',
            engine_groups: [group(2, 2)],
          },
        ],
      },
      teacher: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: { default_model: 'teacher' },
        models: [
          {
            name: 'teacher',
            model_path: '/models/teacher',
            weight_source: 'static',
            engine_groups: [group(2, 2)],
          },
        ],
      },
    },
  };
}

/** Defer layout: all three roles share the 8 actor GPUs, one phase at a time. */
export function deferConfig() {
  return {
    cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
    training: { actor_gpus: 8, offload_train: true },
    roles: {
      rollout: {
        deployment: { mode: 'colocated_split', offload: true },
        routing: { default_model: 'policy' },
        models: [
          {
            name: 'policy',
            model_path: '/models/policy',
            weight_source: 'disk',
            engine_groups: [group(8, 4)],
          },
        ],
      },
      genrm: {
        deployment: { mode: 'colocated_defer', offload: true },
        routing: { default_model: 'judge' },
        models: [
          {
            name: 'judge',
            model_path: '/models/judge',
            weight_source: 'static',
            engine_groups: [group(8, 4)],
          },
        ],
      },
      teacher: {
        deployment: { mode: 'colocated_defer', offload: true },
        routing: { default_model: 'teacher' },
        models: [
          {
            name: 'teacher',
            model_path: '/models/teacher',
            weight_source: 'static',
            engine_groups: [group(8, 8)],
          },
        ],
      },
    },
    schedule: {
      activation_groups: [
        {
          name: 'actor',
          phases: [
            { name: 'rollout', residents: ['rollout'] },
            { name: 'genrm_score', residents: ['genrm'] },
            { name: 'teacher_score', residents: ['teacher'] },
            { name: 'train', residents: ['train'] },
          ],
        },
      ],
    },
  };
}

/** One teacher engine of TP 4 over two 2-GPU nodes: a multi-node replica (one head, two node processes). */
export function twoNodeTeacherConfig() {
  return {
    cluster: {
      nodes: [
        { name: 'node-0', gpus: 2 },
        { name: 'node-1', gpus: 2 },
      ],
    },
    training: { actor_gpus: 0 },
    roles: {
      teacher: {
        deployment: { mode: 'decoupled' },
        models: [
          {
            name: 'teacher',
            model_path: '/models/teacher',
            weight_source: 'static',
            engine_groups: [group(4, 4)],
          },
        ],
      },
    },
  };
}
