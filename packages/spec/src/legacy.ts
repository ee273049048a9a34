import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { type ConfigRoleInput, parseConfig, type UisConfig } from './config.ts';
import { formatPath, type PathIssue, UisError } from './errors.ts';
import type { EngineGroupSpec, Role, ServerArgValue, WorkerType } from './model.ts';

/** Relax command-line flags -> the same config the YAML file produces. Pure: files named by flags
 * (`--sglang-config`) are passed in `files` by the caller, which does the I/O. Relax's own preflight
 * (relax/utils/inference_placement-style checks on argparse values) is mirrored here for the rules that concern
 * flags; layout rules are left to the planner so that both inputs get the same violations. */

export interface RelaxArgsOptions {
  /** path -> file content for flags whose value is a file path (`--sglang-config`). */
  files?: Record<string, string>;
  /** Ignore flags this adapter does not know (training flags of a full Relax command line). */
  allowUnknown?: boolean;
}

const BOOLEAN_FLAGS = new Set([
  'colocate',
  'fully-async',
  'hybrid',
  'offload',
  'offload-train',
  'offload-rollout',
  'debug-rollout-only',
  'debug-train-only',
  'rollout-external',
  'use-opd',
  'defer-reward-to-post-process',
]);
const VALUE_FLAGS = new Set([
  'resource',
  'num-gpus-per-node',
  'hf-checkpoint',
  'rollout-num-gpus',
  'rollout-num-gpus-per-engine',
  'sglang-config',
  'prefill-num-servers',
  'rollout-external-engine-addrs',
  'sglang-router-ip',
  'sglang-router-port',
  'sglang-router-policy',
  'sglang-router-request-timeout-secs',
  'genrm-model-path',
  'genrm-num-gpus',
  'genrm-num-gpus-per-engine',
  'genrm-engine-config',
  'genrm-sampling-config',
  'genrm-instances',
  'opd-type',
  'teacher-hf-checkpoint',
  'teacher-num-gpus-per-engine',
  'opd-teacher-routes',
  'opd-teacher-key',
  'opd-teacher-url',
]);
/** Flags that take one or more values (argparse nargs="+"); commas also separate values. */
const LIST_FLAGS = new Set(['inference-defer-roles', 'rollout-external-engine-addrs']);

type FlagValue = string | boolean | string[];

class Issues {
  readonly list: PathIssue[] = [];
  add(flag: string, message: string, code: PathIssue['code'] = 'invalid_flag'): void {
    this.list.push({ code, path: flag.startsWith('--') ? flag : `--${flag}`, message });
  }
}

const isFlag = (t: string | undefined) => t?.startsWith('--') === true && t.length > 2;

function tokenize(argv: readonly string[], issues: Issues, allowUnknown: boolean): Map<string, FlagValue> {
  const flags = new Map<string, FlagValue>();
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] ?? '';
    if (!isFlag(token)) {
      issues.add(
        token,
        `unexpected argument "${token}"; flags look like --name value`,
        'unexpected_argument',
      );
      continue;
    }
    const eq = token.indexOf('=');
    const name = (eq === -1 ? token.slice(2) : token.slice(2, eq)).replaceAll('_', '-');
    const inline = eq === -1 ? undefined : token.slice(eq + 1);
    const passthrough = name.startsWith('sglang-') || name.startsWith('teacher-sglang-');
    const known = BOOLEAN_FLAGS.has(name) || VALUE_FLAGS.has(name) || LIST_FLAGS.has(name) || passthrough;
    if (!known && !allowUnknown) {
      issues.add(name, `unknown Relax flag --${name}; check the spelling`, 'unknown_flag');
    }
    if (flags.has(name)) issues.add(name, `--${name} is given twice; keep one`, 'duplicate_flag');
    if (LIST_FLAGS.has(name)) {
      const values: string[] = inline === undefined ? [] : [inline];
      while (inline === undefined && i + 1 < argv.length && !isFlag(argv[i + 1]))
        values.push(argv[++i] ?? '');
      const split = values.flatMap((v) => v.split(',')).filter((v) => v !== '');
      if (split.length === 0) issues.add(name, `--${name} needs at least one value`, 'missing_value');
      flags.set(name, split);
      continue;
    }
    if (BOOLEAN_FLAGS.has(name)) {
      let value: string | undefined = inline;
      if (value === undefined && (argv[i + 1] === 'true' || argv[i + 1] === 'false')) value = argv[++i];
      if (value !== undefined && value !== 'true' && value !== 'false') {
        issues.add(name, `--${name} is a switch; give no value, or true / false`);
      }
      flags.set(name, value !== 'false');
      continue;
    }
    if (inline !== undefined) {
      flags.set(name, inline);
    } else if (i + 1 < argv.length && !isFlag(argv[i + 1])) {
      flags.set(name, argv[++i] ?? '');
    } else if (passthrough || !known) {
      // `--sglang-enable-dp-attention` style switches pass through as true.
      flags.set(name, true);
    } else {
      issues.add(name, `--${name} needs a value`, 'missing_value');
    }
  }
  return flags;
}

function str(flags: Map<string, FlagValue>, name: string): string | undefined {
  const v = flags.get(name);
  return typeof v === 'string' ? v : undefined;
}
const bool = (flags: Map<string, FlagValue>, name: string) => flags.get(name) === true;

function int(flags: Map<string, FlagValue>, name: string, issues: Issues, min = 1): number | undefined {
  const v = str(flags, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) {
    issues.add(name, `--${name} must be a whole number >= ${min}, got "${v}"`);
    return undefined;
  }
  return n;
}

function json(flags: Map<string, FlagValue>, name: string, issues: Issues): unknown {
  const v = str(flags, name);
  if (v === undefined) return undefined;
  try {
    return JSON.parse(v);
  } catch (e) {
    issues.add(name, `--${name} must be JSON: ${e instanceof Error ? e.message : String(e)}`, 'invalid_json');
    return undefined;
  }
}

/** `--sglang-mem-fraction-static 0.8` -> server arg `mem_fraction_static: 0.8`. */
function scalar(value: FlagValue): ServerArgValue {
  if (typeof value === 'boolean') return value;
  if (Array.isArray(value)) return value.join(',');
  if (value === 'true') return true;
  if (value === 'false') return false;
  if (value !== '' && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(value)) return Number(value);
  return value;
}

const ROUTER_FLAGS = new Set(['router-ip', 'router-port', 'router-policy', 'router-request-timeout-secs']);

function passthrough(flags: Map<string, FlagValue>, prefix: string): Record<string, ServerArgValue> {
  const out: Record<string, ServerArgValue> = {};
  for (const [name, value] of flags) {
    if (!name.startsWith(prefix)) continue;
    const field = name.slice(prefix.length);
    if (prefix === 'sglang-' && (ROUTER_FLAGS.has(field) || field === 'config')) continue;
    out[field.replaceAll('-', '_')] = scalar(value);
  }
  return out;
}

const ResourceSchema = z.record(
  z.string(),
  z.tuple([z.literal(1, 'only one service replica per role is supported'), z.number().int().nonnegative()]),
);

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
                    overrides: z
                      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
                      .default({}),
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

const GenrmInstancesSchema = z.record(
  z.string().min(1),
  z
    .object({
      model_path: z.string().min(1),
      num_gpus: z.number().int().positive(),
      num_gpus_per_engine: z.number().int().positive().optional(),
      engine_config: z
        .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
        .optional(),
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

function zodInto(issues: Issues, flag: string, error: z.ZodError): void {
  for (const issue of error.issues) {
    issues.add(`${flag}${issue.path.length ? ` ${formatPath(issue.path)}` : ''}`, issue.message);
  }
}

/** Group parallelism comes from the server args Relax reads (tp_size, pp_size, dp_size, ...). */
function group(
  worker_type: WorkerType,
  num_gpus: number,
  gpus_per_engine: number,
  args: Record<string, ServerArgValue>,
  defaults: { pp?: number; dp?: number; dpAttention?: boolean; tpIsEngine?: boolean } = {},
): EngineGroupSpec {
  const { tp_size, pp_size, dp_size, ep_size, enable_dp_attention, ...server_args } = args;
  const num = (v: ServerArgValue | undefined, d: number) => (typeof v === 'number' ? v : d);
  const pp = num(pp_size, defaults.pp ?? 1);
  return {
    worker_type,
    num_gpus,
    gpus_per_engine,
    tp: num(tp_size, defaults.tpIsEngine ? gpus_per_engine : Math.max(1, Math.floor(gpus_per_engine / pp))),
    pp,
    dp: num(dp_size, defaults.dp ?? 1),
    ep: num(ep_size, 1),
    enable_dp_attention:
      enable_dp_attention === undefined ? (defaults.dpAttention ?? false) : enable_dp_attention === true,
    server_args,
  };
}

const modelName = (key: string) =>
  key.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '') || 'default';

/** Converts a Relax argv (without the program name) into the config type of `loadConfig`. Throws a 400 UisError
 * (`invalid_relax_args`) listing every problem with the flag it concerns. */
export function fromRelaxArgs(argv: readonly string[], options: RelaxArgsOptions = {}): UisConfig {
  const issues = new Issues();
  const flags = tokenize(argv, issues, options.allowUnknown ?? false);
  const perNode = int(flags, 'num-gpus-per-node', issues) ?? 8;

  const rawResource = json(flags, 'resource', issues);
  const resource: Record<string, number> = {};
  if (rawResource !== undefined) {
    const r = ResourceSchema.safeParse(rawResource);
    if (r.success) for (const [role, [, gpus]] of Object.entries(r.data)) resource[role] = gpus;
    else zodInto(issues, '--resource', r.error);
  } else if (!flags.has('resource')) {
    issues.add(
      'resource',
      '--resource is required, e.g. \'{"actor": [1, 8], "rollout": [1, 8]}\'',
      'missing_flag',
    );
  }

  const hybrid = bool(flags, 'hybrid');
  const fullyAsync = bool(flags, 'fully-async');
  const debugTrainOnly = bool(flags, 'debug-train-only');
  const debugRolloutOnly = bool(flags, 'debug-rollout-only');
  let colocate = bool(flags, 'colocate') && !hybrid;
  if (colocate && fullyAsync)
    issues.add('fully-async', '--fully-async with --colocate needs --hybrid', 'contradictory_flags');
  // Relax: giving engine addresses is what makes the rollout external.
  const rolloutExternal = bool(flags, 'rollout-external') || flags.has('rollout-external-engine-addrs');
  if (rolloutExternal && colocate) {
    issues.add(
      'rollout-external',
      'an external rollout cannot share GPUs; drop --colocate',
      'contradictory_flags',
    );
  }
  if (debugRolloutOnly) colocate = false;
  if (debugRolloutOnly && debugTrainOnly) {
    issues.add(
      'debug-train-only',
      '--debug-rollout-only and --debug-train-only exclude each other',
      'contradictory_flags',
    );
  }

  // Relax's --offload turns on both sides; in colocate mode both default to on.
  const offloadAll = flags.get('offload');
  const offloadTrain = (flags.get('offload-train') ?? offloadAll ?? colocate) === true;
  const offloadRollout = (flags.get('offload-rollout') ?? offloadAll ?? colocate) === true;

  const deferred = new Set<string>((flags.get('inference-defer-roles') as string[] | undefined) ?? []);
  if (bool(flags, 'defer-reward-to-post-process')) deferred.add('genrm');
  for (const role of deferred) {
    if (role !== 'genrm' && role !== 'teacher') {
      issues.add(
        'inference-defer-roles',
        `only genrm and teacher can be deferred, not "${role}"`,
        'defer_role_not_allowed',
      );
    }
  }
  if (deferred.size > 0 && !colocate) {
    issues.add(
      'inference-defer-roles',
      'deferred inference needs colocated synchronous placement: add --colocate and drop --fully-async/--hybrid',
      'contradictory_flags',
    );
  }

  const roleMode = (role: Role) =>
    colocate
      ? deferred.has(role)
        ? ('colocated_defer' as const)
        : ('colocated_split' as const)
      : ('decoupled' as const);
  const deployment = (role: Role) => ({
    mode: roleMode(role),
    offload: colocate ? offloadRollout : false,
  });

  const roles: Partial<Record<Role, ConfigRoleInput>> = {};

  // Rollout.
  if (resource.rollout !== undefined && !debugTrainOnly) {
    const total = resource.rollout;
    const configured = int(flags, 'rollout-num-gpus', issues);
    if (configured !== undefined && configured !== total) {
      issues.add(
        'rollout-num-gpus',
        `--rollout-num-gpus ${configured} must equal the --resource rollout budget ${total}`,
        'contradictory_flags',
      );
    }
    const perEngine = int(flags, 'rollout-num-gpus-per-engine', issues) ?? total;
    const passArgs = passthrough(flags, 'sglang-');
    const defaults = {
      pp: typeof passArgs.pp_size === 'number' ? passArgs.pp_size : 1,
      dp: typeof passArgs.dp_size === 'number' ? passArgs.dp_size : 1,
      dpAttention: passArgs.enable_dp_attention === true,
    };
    const { tp_size: _t, pp_size: _p, dp_size: _d, enable_dp_attention: _e, ...sharedArgs } = passArgs;
    const modelPath = str(flags, 'hf-checkpoint') ?? 'policy';
    const weight_source = colocate ? ('tensor' as const) : ('dcs' as const);
    const router = {
      policy: (str(flags, 'sglang-router-policy') ?? 'cache_aware') as 'cache_aware',
      args: Object.fromEntries(
        (['ip', 'port', 'request-timeout-secs'] as const)
          .map((k) => [k.replaceAll('-', '_'), str(flags, `sglang-router-${k}`)] as const)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => [k, scalar(v as string)]),
      ),
    };
    const models: ConfigRoleInput['models'] = [];
    const configPath = str(flags, 'sglang-config');
    if (configPath !== undefined) {
      const text = options.files?.[configPath];
      if (text === undefined) {
        issues.add('sglang-config', `file ${configPath} was not provided (the CLI reads it)`, 'missing_file');
      } else {
        let doc: unknown;
        try {
          doc = parseYaml(text);
        } catch (e) {
          issues.add(
            'sglang-config',
            `not valid YAML: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`,
            'invalid_yaml',
          );
        }
        const parsed = doc === undefined ? undefined : SglangConfigSchema.safeParse(doc);
        if (parsed && !parsed.success) zodInto(issues, '--sglang-config', parsed.error);
        if (parsed?.success) {
          let sum = 0;
          for (const m of parsed.data.sglang) {
            models.push({
              name: modelName(m.name),
              model_path: m.model_path ?? modelPath,
              weight_source,
              route_mode: 'sglang_router',
              router,
              engine_groups: m.engine_groups.map((g) => {
                sum += g.num_gpus;
                return group(
                  g.worker_type,
                  g.num_gpus,
                  g.num_gpus_per_engine ?? m.num_gpus_per_engine ?? perEngine,
                  { ...sharedArgs, ...g.overrides },
                  defaults,
                );
              }),
            });
          }
          if (sum !== total) {
            issues.add(
              'sglang-config',
              `engine groups sum to ${sum} GPUs but the rollout budget is ${total}`,
              'contradictory_flags',
            );
          }
        }
      }
    } else {
      const prefill = int(flags, 'prefill-num-servers', issues, 0) ?? 0;
      const groups =
        prefill > 0
          ? [
              group('prefill', prefill * perEngine, perEngine, sharedArgs, defaults),
              group('decode', total - prefill * perEngine, perEngine, sharedArgs, defaults),
            ]
          : [group('regular', total, perEngine, sharedArgs, defaults)];
      if (prefill > 0 && total - prefill * perEngine <= 0) {
        issues.add(
          'prefill-num-servers',
          `${prefill} prefill servers leave no GPUs of ${total} for decode`,
          'contradictory_flags',
        );
      }
      models.push({
        name: 'default',
        model_path: modelPath,
        weight_source,
        route_mode: 'sglang_router',
        router,
        engine_groups: groups,
      });
    }
    const urls = flags.get('rollout-external-engine-addrs') as string[] | undefined;
    roles.rollout = {
      deployment: rolloutExternal
        ? { mode: 'decoupled', pg_owner: 'external', offload: false }
        : deployment('rollout'),
      routing: { default_model: models[0]?.name },
      models,
      expose_engine_urls: true,
      ...(rolloutExternal ? { external_engine_urls: urls ?? [] } : {}),
    };
  }

  // GenRM.
  const instancesRaw = json(flags, 'genrm-instances', issues);
  const genrmPath = str(flags, 'genrm-model-path');
  if ((instancesRaw !== undefined || genrmPath !== undefined) && !debugTrainOnly) {
    const engineConfig = json(flags, 'genrm-engine-config', issues);
    const ec = z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
      .safeParse(engineConfig ?? {});
    if (!ec.success) zodInto(issues, '--genrm-engine-config', ec.error);
    const samplingRaw = json(flags, 'genrm-sampling-config', issues);
    const sampling = GenrmSamplingSchema.safeParse(samplingRaw ?? {});
    if (!sampling.success) zodInto(issues, '--genrm-sampling-config', sampling.error);
    const {
      chat_template_kwargs = {},
      max_response_len,
      ...samplingRest
    } = sampling.success ? sampling.data : {};
    const sampling_defaults = {
      ...samplingRest,
      ...(max_response_len ? { max_new_tokens: max_response_len } : {}),
    };
    const perEngineFlag = int(flags, 'genrm-num-gpus-per-engine', issues);
    const budget = resource.genrm;
    const entries: Array<{
      name: string;
      path: string;
      gpus: number;
      perEngine: number;
      args: Record<string, ServerArgValue>;
    }> = [];
    if (instancesRaw !== undefined) {
      const inst = GenrmInstancesSchema.safeParse(instancesRaw);
      if (!inst.success) zodInto(issues, '--genrm-instances', inst.error);
      else
        for (const [key, spec] of Object.entries(inst.data)) {
          entries.push({
            name: modelName(key),
            path: spec.model_path,
            gpus: spec.num_gpus,
            perEngine: spec.num_gpus_per_engine ?? perEngineFlag ?? 1,
            args: spec.engine_config ?? (ec.success ? ec.data : {}),
          });
        }
    } else if (genrmPath !== undefined) {
      const gpus = int(flags, 'genrm-num-gpus', issues) ?? budget;
      if (gpus === undefined)
        issues.add(
          'genrm-num-gpus',
          'GenRM needs --genrm-num-gpus or a genrm entry in --resource',
          'missing_flag',
        );
      else
        entries.push({
          name: 'genrm',
          path: genrmPath,
          gpus,
          perEngine: perEngineFlag ?? 1,
          args: ec.success ? ec.data : {},
        });
    }
    const sum = entries.reduce((s, e) => s + e.gpus, 0);
    if (entries.length > 0 && budget !== sum) {
      issues.add(
        'resource',
        `the genrm budget (${budget ?? 'missing'}) must equal the GenRM models' GPUs (${sum})`,
        'contradictory_flags',
      );
    }
    if (entries.length > 0) {
      roles.genrm = {
        deployment: deployment('genrm'),
        routing: { default_model: entries[0]?.name },
        models: entries.map((e) => ({
          name: e.name,
          model_path: e.path,
          weight_source: 'static',
          // GenRM is offloaded with its weights kept on CPU (Relax forces enable_weights_cpu_backup).
          engine_groups: [
            group(
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
  } else if (deferred.has('genrm')) {
    issues.add(
      'inference-defer-roles',
      'GenRM is deferred but no GenRM model is configured (--genrm-model-path)',
      'contradictory_flags',
    );
  }

  if (rolloutExternal && roles.genrm) {
    // Relax: with an external rollout nothing owns the placement group managed GenRM engines would live in.
    issues.add(
      'rollout-external',
      'an external rollout cannot be combined with managed GenRM models',
      'contradictory_flags',
    );
  }

  // Teacher (OPD with SGLang teachers).
  const opdType = str(flags, 'opd-type') ?? 'sglang';
  if (opdType !== 'sglang' && opdType !== 'megatron')
    issues.add('opd-type', `--opd-type must be sglang or megatron, got "${opdType}"`);
  const routesRaw = json(flags, 'opd-teacher-routes', issues);
  const teacherCkpt = str(flags, 'teacher-hf-checkpoint');
  const teacherUrl = str(flags, 'opd-teacher-url');
  const managedTeacher =
    bool(flags, 'use-opd') &&
    opdType === 'sglang' &&
    (teacherCkpt !== undefined || routesRaw !== undefined) &&
    resource.teacher !== undefined &&
    !debugTrainOnly;
  if (managedTeacher) {
    const total = resource.teacher ?? 0;
    const routesParsed = z
      .record(z.string().min(1), z.string().min(1))
      .safeParse(routesRaw ?? { default: teacherCkpt });
    if (!routesParsed.success) zodInto(issues, '--opd-teacher-routes', routesParsed.error);
    const routes = routesParsed.success ? routesParsed.data : {};
    const n = Object.keys(routes).length;
    if (routesParsed.success && n === 0)
      issues.add('opd-teacher-routes', 'give at least one route_key -> checkpoint', 'invalid_flag');
    if (n > 0 && total % n !== 0) {
      issues.add(
        'opd-teacher-routes',
        `the teacher budget ${total} does not split evenly across ${n} teachers`,
        'contradictory_flags',
      );
    }
    const each = n > 0 ? Math.floor(total / n) : 0;
    if (each > 0) {
      const perEngine = int(flags, 'teacher-num-gpus-per-engine', issues) ?? each;
      const args = passthrough(flags, 'teacher-sglang-');
      const models = Object.entries(routes).map(([key, ckpt]) => ({
        name: modelName(key),
        model_path: ckpt,
        weight_source: 'static' as const,
        engine_groups: [group('regular', each, perEngine, args)],
      }));
      const key = str(flags, 'opd-teacher-key');
      roles.teacher = {
        deployment: deployment('teacher'),
        routing: {
          default_model: models[0]?.name,
          route_keys:
            routesRaw === undefined
              ? {}
              : Object.fromEntries(Object.keys(routes).map((k) => [k, modelName(k)])),
        },
        models,
        expose_engine_urls: true,
        ...(key ? { route_key_field: key } : {}),
      };
    }
  } else if (bool(flags, 'use-opd') && opdType === 'sglang' && teacherUrl !== undefined && !debugTrainOnly) {
    // An external teacher: routed by URL, placed elsewhere.
    roles.teacher = {
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
  if (deferred.has('teacher') && roles.teacher?.deployment.mode !== 'colocated_defer') {
    issues.add(
      'inference-defer-roles',
      'a deferred teacher needs a managed SGLang teacher (--use-opd --teacher-hf-checkpoint and a teacher entry in --resource)',
      'contradictory_flags',
    );
  }

  // Training: the critic shares the actor PG when colocated with as many GPUs (Relax's rule).
  const training = {
    actor_gpus: debugRolloutOnly ? 0 : (resource.actor ?? 0),
    critic_gpus: debugRolloutOnly ? 0 : (resource.critic ?? 0),
    offload_train: offloadTrain,
    fully_async: fullyAsync,
    hybrid,
  };
  if (colocate && training.actor_gpus <= 0) {
    issues.add(
      'resource',
      'colocated placement needs a positive actor GPU count in --resource',
      'contradictory_flags',
    );
  }

  // Schedule: rollout, then each deferred scorer, then the trainer, on the actor PG.
  const phases: Array<{ name: string; residents: Array<Role | 'train'> }> = [];
  if (colocate && deferred.size > 0) {
    if (roles.rollout) phases.push({ name: 'rollout', residents: ['rollout'] });
    for (const role of ['genrm', 'teacher'] as const)
      if (deferred.has(role) && roles[role]) phases.push({ name: `${role}_score`, residents: [role] });
    phases.push({ name: 'train', residents: ['train'] });
  }

  // Inventory: Relax has none, so synthesize whole nodes that hold every pool.
  let needed =
    training.actor_gpus +
    (colocate && training.critic_gpus === training.actor_gpus ? 0 : training.critic_gpus);
  for (const [role, gpus] of Object.entries(resource)) {
    if (role === 'actor' || role === 'critic') continue;
    if (role === 'rollout' || role === 'genrm' || role === 'teacher') {
      const spec = roles[role];
      if (!spec || spec.external_engine_urls || colocate) continue;
    }
    needed += gpus;
  }
  const nodeCount = Math.max(1, Math.ceil(needed / perNode));
  const nodes = Array.from({ length: nodeCount }, (_, i) => ({ name: `node-${i}`, gpus: perNode }));

  if (issues.list.length > 0) {
    throw new UisError({
      code: 'invalid_relax_args',
      status: 400,
      path: issues.list[0]?.path,
      message: issues.list.map((i) => `${i.path}: ${i.message}`).join('; '),
      details: issues.list,
    });
  }
  return parseConfig(
    {
      cluster: { nodes },
      training,
      roles,
      schedule: { activation_groups: phases.length > 0 ? [{ name: 'actor', pool: 'actor', phases }] : [] },
    },
    'relax args',
  );
}
