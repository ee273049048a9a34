import type { ConfigRoleInput, ServerArgValue } from '@uis/spec';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { engineGroup, modelName, type ParallelDefaults, ServerArgsSchema } from './engine-group.ts';
import { deploymentOf, type RelaxMode } from './mode.ts';
import { type FlagReader, scalar } from './reader.ts';

/** The rollout translator: `--resource rollout`, `--rollout-*`, `--sglang-config`, `--prefill-num-servers`,
 * `--sglang-*` pass-through and the router flags -> the rollout role. */

const SglangConfigSchema = z
  .object({
    sglang: z
      .array(
        z
          .object({
            name: z.string().min(1),
            model_path: z.string().min(1).optional(),
            num_gpus_per_engine: z.number().int().positive().optional(),
            engine_groups: z
              .array(
                z
                  .object({
                    worker_type: z.enum(['regular', 'prefill', 'decode', 'placeholder']).default('regular'),
                    num_gpus: z.number().int().positive(),
                    num_gpus_per_engine: z.number().int().positive().optional(),
                    overrides: ServerArgsSchema.default({}),
                  })
                  .strict(),
              )
              .min(1),
          })
          .strict(),
      )
      .min(1),
  })
  .strict();

type RolloutModel = ConfigRoleInput['models'][number];

/** Router fields and the config file are not SGLang server args. */
const NOT_SERVER_ARGS = new Set([
  'router-ip',
  'router-port',
  'router-policy',
  'router-request-timeout-secs',
  'config',
]);

interface Shared {
  perEngine: number;
  args: Record<string, ServerArgValue>;
  defaults: ParallelDefaults;
  base: Omit<RolloutModel, 'name' | 'model_path' | 'engine_groups'>;
  modelPath: string;
}

function shared(flags: FlagReader, mode: RelaxMode, total: number): Shared {
  const passArgs = flags.passthrough('sglang-', NOT_SERVER_ARGS);
  const { tp_size: _t, pp_size: _p, dp_size: _d, enable_dp_attention: _e, ...args } = passArgs;
  const routerArgs: Record<string, ServerArgValue> = {};
  for (const k of ['ip', 'port', 'request-timeout-secs']) {
    const v = flags.str(`sglang-router-${k}`);
    if (v !== undefined) routerArgs[k.replaceAll('-', '_')] = scalar(v);
  }
  return {
    perEngine: flags.int('rollout-num-gpus-per-engine') ?? total,
    args,
    defaults: {
      pp: typeof passArgs.pp_size === 'number' ? passArgs.pp_size : 1,
      dp: typeof passArgs.dp_size === 'number' ? passArgs.dp_size : 1,
      dpAttention: passArgs.enable_dp_attention === true,
    },
    base: {
      weight_source: mode.colocate ? 'tensor' : 'dcs',
      route_mode: 'sglang_router',
      router: {
        policy: (flags.str('sglang-router-policy') ?? 'cache_aware') as 'cache_aware',
        args: routerArgs,
      },
    },
    modelPath: flags.str('hf-checkpoint') ?? 'policy',
  };
}

function configFileModels(flags: FlagReader, files: Record<string, string>, s: Shared, total: number) {
  const path = flags.str('sglang-config') ?? '';
  const text = files[path];
  if (text === undefined) {
    flags.add('sglang-config', `file ${path} was not provided (the CLI reads it)`, 'missing_file');
    return [];
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    const first = e instanceof Error ? e.message.split('\n')[0] : String(e);
    flags.add('sglang-config', `not valid YAML: ${first}`, 'invalid_yaml');
    return [];
  }
  const parsed = SglangConfigSchema.safeParse(doc);
  if (!parsed.success) {
    flags.zod('--sglang-config', parsed.error);
    return [];
  }
  let sum = 0;
  const models: RolloutModel[] = parsed.data.sglang.map((m) => ({
    ...s.base,
    name: modelName(m.name),
    model_path: m.model_path ?? s.modelPath,
    engine_groups: m.engine_groups.map((g) => {
      sum += g.num_gpus;
      const perEngine = g.num_gpus_per_engine ?? m.num_gpus_per_engine ?? s.perEngine;
      return engineGroup(g.worker_type, g.num_gpus, perEngine, { ...s.args, ...g.overrides }, s.defaults);
    }),
  }));
  if (sum !== total) {
    flags.add(
      'sglang-config',
      `engine groups sum to ${sum} GPUs but the rollout budget is ${total}`,
      'contradictory_flags',
    );
  }
  return models;
}

function flagModel(flags: FlagReader, s: Shared, total: number): RolloutModel {
  const prefill = flags.int('prefill-num-servers', 0) ?? 0;
  const decode = total - prefill * s.perEngine;
  if (prefill > 0 && decode <= 0) {
    flags.add(
      'prefill-num-servers',
      `${prefill} prefill servers leave no GPUs of ${total} for decode`,
      'contradictory_flags',
    );
  }
  const groups =
    prefill > 0
      ? [
          engineGroup('prefill', prefill * s.perEngine, s.perEngine, s.args, s.defaults),
          engineGroup('decode', decode, s.perEngine, s.args, s.defaults),
        ]
      : [engineGroup('regular', total, s.perEngine, s.args, s.defaults)];
  return { ...s.base, name: 'default', model_path: s.modelPath, engine_groups: groups };
}

export function rolloutRole(
  flags: FlagReader,
  mode: RelaxMode,
  files: Record<string, string>,
): ConfigRoleInput | undefined {
  const total = mode.resource.rollout;
  if (total === undefined || mode.debugTrainOnly) return undefined;
  const configured = flags.int('rollout-num-gpus');
  if (configured !== undefined && configured !== total) {
    flags.add(
      'rollout-num-gpus',
      `--rollout-num-gpus ${configured} must equal the --resource rollout budget ${total}`,
      'contradictory_flags',
    );
  }
  const s = shared(flags, mode, total);
  const models = flags.has('sglang-config')
    ? configFileModels(flags, files, s, total)
    : [flagModel(flags, s, total)];
  const role: ConfigRoleInput = {
    deployment: deploymentOf(mode, 'rollout'),
    routing: { default_model: models[0]?.name },
    models,
    expose_engine_urls: true,
  };
  if (!mode.rolloutExternal) return role;
  // Relax's planner still gives an external rollout its --resource GPUs as a dedicated placement group (its
  // service plan counts every role with a resource entry); the engines themselves are attached by address.
  return {
    ...role,
    deployment: { mode: 'decoupled', pg_owner: 'external', offload: false },
    external_engine_urls: flags.list('rollout-external-engine-addrs') ?? [],
    reserved_gpus: total,
  };
}
