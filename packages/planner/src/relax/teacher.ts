import type { ConfigRoleInput } from '@uis/spec';
import { z } from 'zod';
import { engineGroup, modelName } from './engine-group.ts';
import { deploymentOf, type RelaxMode } from './mode.ts';
import type { FlagReader } from './reader.ts';

/** The teacher translator (OPD with SGLang teachers): a managed teacher from `--teacher-hf-checkpoint` or
 * `--opd-teacher-routes` with a teacher entry in `--resource`, or an external one from `--opd-teacher-url`. */

const RoutesSchema = z.record(z.string().min(1), z.string().min(1));

function managedTeacher(flags: FlagReader, mode: RelaxMode): ConfigRoleInput | undefined {
  const total = mode.resource.teacher ?? 0;
  const explicitRoutes = flags.has('opd-teacher-routes');
  const routes =
    flags.parsed('opd-teacher-routes', RoutesSchema, { default: flags.str('teacher-hf-checkpoint') }) ?? {};
  const n = Object.keys(routes).length;
  if (explicitRoutes && n === 0 && flags.issues.every((i) => !i.path.startsWith('--opd-teacher-routes')))
    flags.add('opd-teacher-routes', 'give at least one route_key -> checkpoint', 'invalid_flag');
  if (n > 0 && total % n !== 0) {
    flags.add(
      'opd-teacher-routes',
      `the teacher budget ${total} does not split evenly across ${n} teachers`,
      'contradictory_flags',
    );
  }
  const each = n > 0 ? Math.floor(total / n) : 0;
  if (each <= 0) return undefined;
  const perEngine = flags.int('teacher-num-gpus-per-engine') ?? each;
  const args = flags.passthrough('teacher-sglang-');
  const models = Object.entries(routes).map(([key, ckpt]) => ({
    name: modelName(key),
    model_path: ckpt,
    weight_source: 'static' as const,
    engine_groups: [engineGroup('regular', each, perEngine, args)],
  }));
  const key = flags.str('opd-teacher-key');
  return {
    deployment: deploymentOf(mode, 'teacher'),
    routing: {
      default_model: models[0]?.name,
      route_keys: explicitRoutes ? Object.fromEntries(Object.keys(routes).map((k) => [k, modelName(k)])) : {},
    },
    models,
    expose_engine_urls: true,
    ...(key ? { route_key_field: key } : {}),
  };
}

export function teacherRole(flags: FlagReader, mode: RelaxMode): ConfigRoleInput | undefined {
  const opdType = flags.str('opd-type') ?? 'sglang';
  if (opdType !== 'sglang' && opdType !== 'megatron')
    flags.add('opd-type', `--opd-type must be sglang or megatron, got "${opdType}"`);
  const sglangOpd = flags.bool('use-opd') && opdType === 'sglang' && !mode.debugTrainOnly;
  const teacherCkpt = flags.str('teacher-hf-checkpoint');
  const teacherUrl = flags.str('opd-teacher-url');
  let role: ConfigRoleInput | undefined;
  // Relax's is_managed_teacher_enabled: a checkpoint or routes, and a teacher entry in --resource.
  if (
    sglangOpd &&
    (teacherCkpt !== undefined || flags.has('opd-teacher-routes')) &&
    mode.resource.teacher !== undefined
  ) {
    role = managedTeacher(flags, mode);
  } else if (sglangOpd && teacherUrl !== undefined) {
    role = {
      deployment: { mode: 'decoupled', pg_owner: 'external', offload: false },
      models: [
        {
          name: 'teacher',
          model_path: teacherCkpt ?? 'external',
          weight_source: 'static',
          engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }],
        },
      ],
      expose_engine_urls: true,
      external_engine_urls: [teacherUrl],
    };
  }
  if (mode.deferred.has('teacher') && role?.deployment.mode !== 'colocated_defer') {
    flags.add(
      'inference-defer-roles',
      'a deferred teacher needs a managed SGLang teacher (--use-opd --teacher-hf-checkpoint and a teacher entry in --resource)',
      'contradictory_flags',
    );
  }
  return role;
}
