import type { ConfigRoleInput, ServerArgValue } from '@uis/spec';
import { z } from 'zod';
import { engineGroup, modelName, ServerArgsSchema } from './engine-group.ts';
import { deploymentOf, type RelaxMode } from './mode.ts';
import type { FlagReader } from './reader.ts';

/** The GenRM translator: `--genrm-model-path` or `--genrm-instances`, GPUs, engine and sampling config -> the
 * genrm role. */

const GenrmInstancesSchema = z.record(
  z.string().min(1),
  z
    .object({
      model_path: z.string().min(1),
      num_gpus: z.number().int().positive(),
      num_gpus_per_engine: z.number().int().positive().optional(),
      engine_config: ServerArgsSchema.optional(),
    })
    .strict(),
);

const GenrmSamplingSchema = z
  .object({
    temperature: z.number().optional(),
    top_p: z.number().optional(),
    top_k: z.number().int().optional(),
    max_response_len: z.number().int().positive().optional(),
    chat_template_kwargs: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

interface Entry {
  name: string;
  path: string;
  gpus: number;
  perEngine: number;
  args: Record<string, ServerArgValue>;
}

function entries(flags: FlagReader, mode: RelaxMode, engineConfig: Record<string, ServerArgValue>): Entry[] {
  const perEngineFlag = flags.int('genrm-num-gpus-per-engine');
  if (flags.has('genrm-instances')) {
    const instances = flags.parsed('genrm-instances', GenrmInstancesSchema) ?? {};
    return Object.entries(instances).map(([key, spec]) => ({
      name: modelName(key),
      path: spec.model_path,
      gpus: spec.num_gpus,
      perEngine: spec.num_gpus_per_engine ?? perEngineFlag ?? 1,
      args: spec.engine_config ?? engineConfig,
    }));
  }
  const path = flags.str('genrm-model-path') ?? '';
  const gpus = flags.int('genrm-num-gpus') ?? mode.resource.genrm;
  if (gpus === undefined) {
    flags.add(
      'genrm-num-gpus',
      'GenRM needs --genrm-num-gpus or a genrm entry in --resource',
      'missing_flag',
    );
    return [];
  }
  return [{ name: 'genrm', path, gpus, perEngine: perEngineFlag ?? 1, args: engineConfig }];
}

export function genrmRole(flags: FlagReader, mode: RelaxMode): ConfigRoleInput | undefined {
  const configured = flags.has('genrm-instances') || flags.has('genrm-model-path');
  if (!configured || mode.debugTrainOnly) {
    if (!configured && mode.deferred.has('genrm')) {
      flags.add(
        'inference-defer-roles',
        'GenRM is deferred but no GenRM model is configured (--genrm-model-path)',
        'contradictory_flags',
      );
    }
    return undefined;
  }
  const engineConfig = flags.parsed('genrm-engine-config', ServerArgsSchema, {}) ?? {};
  const sampling = flags.parsed('genrm-sampling-config', GenrmSamplingSchema, {}) ?? {};
  const { chat_template_kwargs = {}, max_response_len, ...samplingRest } = sampling;
  const sampling_defaults = {
    ...samplingRest,
    ...(max_response_len ? { max_new_tokens: max_response_len } : {}),
  };
  const list = entries(flags, mode, engineConfig);
  const budget = mode.resource.genrm;
  const sum = list.reduce((s, e) => s + e.gpus, 0);
  if (list.length > 0 && budget !== sum) {
    flags.add(
      'resource',
      `the genrm budget (${budget ?? 'missing'}) must equal the GenRM models' GPUs (${sum})`,
      'contradictory_flags',
    );
  }
  if (list.length === 0) return undefined;
  if (mode.rolloutExternal) {
    // Relax: with an external rollout nothing owns the placement group managed GenRM engines would live in.
    flags.add(
      'rollout-external',
      'an external rollout cannot be combined with managed GenRM models',
      'contradictory_flags',
    );
  }
  return {
    deployment: deploymentOf(mode, 'genrm'),
    routing: { default_model: list[0]?.name },
    models: list.map((e) => ({
      name: e.name,
      model_path: e.path,
      weight_source: 'static',
      // GenRM is offloaded with its weights kept on CPU (Relax forces enable_weights_cpu_backup).
      engine_groups: [
        engineGroup(
          'regular',
          e.gpus,
          e.perEngine,
          { ...e.args, enable_weights_cpu_backup: true },
          { tpIsEngine: true },
        ),
      ],
      sampling_defaults,
      chat_template_kwargs,
    })),
    expose_engine_urls: true,
  };
}
