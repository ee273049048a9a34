import { z } from 'zod';
import { AutoscaleSpecSchema } from './autoscale.ts';
import type { ErrorCode } from './error-codes.ts';
import { ModelMemorySchema } from './memory.ts';

/** The RFC's internal model: Role -> Model -> Engine group -> Replica. Field names follow the RFC (snake_case)
 * because the same objects travel as JSON to Python controllers. Schemas are strict: an unknown field is an error
 * that names its path, never silently ignored. */

export const RoleSchema = z.enum(['rollout', 'genrm', 'teacher']);
export type Role = z.infer<typeof RoleSchema>;
export const ROLES = RoleSchema.options;

/** What the role's engines do: rollout generation, generative reward scoring, teacher prefill logprobs for OPD. */
export const WorkloadTypeSchema = z.enum(['generation', 'reward', 'distillation']);
export type WorkloadType = z.infer<typeof WorkloadTypeSchema>;
export const DEFAULT_WORKLOAD: Readonly<Record<Role, WorkloadType>> = {
  rollout: 'generation',
  genrm: 'reward',
  teacher: 'distillation',
};

export const DeploymentModeSchema = z.enum([
  'decoupled',
  'colocated_split',
  'colocated_defer',
  'shared_coresident',
]);
export type DeploymentMode = z.infer<typeof DeploymentModeSchema>;

/** Who creates and deletes the placement group (RFC "PG ownership"). */
export const PgOwnerSchema = z.enum(['manager', 'external', 'controller']);
export type PgOwner = z.infer<typeof PgOwnerSchema>;

export const DeploymentSpecSchema = z
  .object({
    mode: DeploymentModeSchema,
    /** Default: decoupled -> manager, colocated -> controller. */
    pg_owner: PgOwnerSchema.optional(),
    /** Name of an existing PG (external or controller-owned). */
    pg_name: z.string().min(1).optional(),
    /** Engines may release GPU memory between phases (required wherever GPUs are shared). */
    offload: z.boolean().default(false),
    /** Colocated defer: the activation group (lease) and the phase this role is resident in. */
    activation_group: z.string().min(1).optional(),
    activation_phase: z.string().min(1).optional(),
  })
  .strict();
export type DeploymentSpec = z.infer<typeof DeploymentSpecSchema>;

export const ReplicaPolicySchema = z.enum(['round_robin', 'least_outstanding', 'affinity', 'cache_aware']);
export type ReplicaPolicy = z.infer<typeof ReplicaPolicySchema>;

export const CacheAwareOptionsSchema = z
  .object({
    cache_threshold: z.number().min(0).max(1).default(0.3),
    balance_abs_threshold: z.number().int().min(0).default(64),
    balance_rel_threshold: z.number().min(1).default(1.5),
    /** Bound on characters remembered per replica tree. */
    max_tree_chars: z
      .number()
      .int()
      .positive()
      .default(1 << 20),
  })
  .strict();
export type CacheAwareOptions = z.infer<typeof CacheAwareOptionsSchema>;

export const RoutingSpecSchema = z
  .object({
    default_model: z.string().min(1).optional(),
    /** route_key -> model name (e.g. OPD's `data_source` -> teacher). */
    route_keys: z.record(z.string(), z.string().min(1)).default({}),
    /** alias -> model name. */
    aliases: z.record(z.string(), z.string().min(1)).default({}),
    policy: ReplicaPolicySchema.default('round_robin'),
    /** Per-model override of `policy`. */
    model_policies: z.record(z.string(), ReplicaPolicySchema).default({}),
    affinity_header: z.string().min(1).default('x-smg-routing-key'),
    cache_aware: CacheAwareOptionsSchema.optional(),
  })
  .strict();
export type RoutingSpec = z.infer<typeof RoutingSpecSchema>;

export const WorkerTypeSchema = z.enum(['regular', 'prefill', 'decode', 'placeholder']);
export type WorkerType = z.infer<typeof WorkerTypeSchema>;
/** The worker type of an engine that runs (a placeholder group launches none). */
export const EngineWorkerTypeSchema = WorkerTypeSchema.exclude(['placeholder']);
export type EngineWorkerType = z.infer<typeof EngineWorkerTypeSchema>;

const positiveInt = z.number().int().positive();

export const ServerArgValueSchema = z.union([z.string(), z.number(), z.boolean(), z.null()]);
export type ServerArgValue = z.infer<typeof ServerArgValueSchema>;

/** Server args the placement decides. An override of one of them would make the engine disagree with the plan
 * (wrong GPUs, wrong world size, wrong port), so overrides naming them are refused, aliases included. */
const PLACEMENT_SERVER_ARGS: Readonly<Record<string, string>> = {
  model_path: 'the model spec (model_path)',
  served_model_name: 'the model spec (served_model_name)',
  host: 'the launcher',
  port: 'the launcher',
  tp_size: 'the engine group (tp)',
  tensor_parallel_size: 'the engine group (tp)',
  pp_size: 'the engine group (pp)',
  pipeline_parallel_size: 'the engine group (pp)',
  dp_size: 'the engine group (dp)',
  data_parallel_size: 'the engine group (dp)',
  ep_size: 'the engine group (ep)',
  expert_parallel_size: 'the engine group (ep)',
  enable_dp_attention: 'the engine group (enable_dp_attention)',
  base_gpu_id: 'the placement plan',
  gpu_id_step: 'the placement plan',
  nnodes: 'the placement plan',
  node_rank: 'the placement plan',
  dist_init_addr: 'the placement plan',
  enable_memory_saver: 'the deployment (offload)',
  disaggregation_mode: 'the engine group (worker_type)',
  disaggregation_bootstrap_port: 'the launcher',
};

/** Accepts `mem_fraction_static`, `mem-fraction-static` and `--mem-fraction-static`; returns the snake_case field. */
export function normalizeServerArgName(name: string): string {
  return name.replace(/^-+/, '').replaceAll('-', '_');
}

/** Why a `server_args` key cannot be used (not an SGLang field name, or set by the placement), or null. The
 * planner reports it before anything starts; the server-args builder refuses it again for library callers. */
export function serverArgIssue(raw: string): { code: ErrorCode; message: string } | null {
  const field = normalizeServerArgName(raw);
  if (!/^[a-z][a-z0-9_]*$/.test(field))
    return {
      code: 'invalid_server_arg',
      message: `server arg "${raw}" is not an SGLang field name; use snake_case such as mem_fraction_static`,
    };
  const owner = PLACEMENT_SERVER_ARGS[field];
  if (owner !== undefined)
    return {
      code: 'server_arg_conflicts_with_placement',
      message: `server arg "${raw}" is set by ${owner}; remove it from server_args and change it there`,
    };
  return null;
}

export const EngineGroupSpecSchema = z
  .object({
    worker_type: WorkerTypeSchema.default('regular'),
    /** GPUs of the whole group (engines * gpus_per_engine). */
    num_gpus: positiveInt,
    gpus_per_engine: positiveInt,
    tp: positiveInt.optional(),
    pp: positiveInt.default(1),
    dp: positiveInt.default(1),
    ep: positiveInt.default(1),
    enable_dp_attention: z.boolean().default(false),
    /** SGLang server-arg overrides for this group (snake_case SGLang field names). */
    server_args: z.record(z.string(), ServerArgValueSchema).default({}),
    /** Fractional Ray GPU reservation each engine process holds on its bundles (default by role). */
    ray_num_gpus: z.number().gt(0).max(1).optional(),
  })
  .strict();
export type EngineGroupSpec = z.infer<typeof EngineGroupSpecSchema>;

/** tp defaults to gpus_per_engine / pp. */
export function groupTp(group: Pick<EngineGroupSpec, 'tp' | 'pp' | 'gpus_per_engine'>): number {
  return group.tp ?? Math.max(1, Math.floor(group.gpus_per_engine / group.pp));
}

export const WeightSourceSchema = z.enum(['static', 'disk', 'dcs', 'tensor']);
export type WeightSource = z.infer<typeof WeightSourceSchema>;

export const RouteModeSchema = z.enum(['direct', 'sglang_router']);
export type RouteMode = z.infer<typeof RouteModeSchema>;

export const RouterSpecSchema = z
  .object({
    policy: z.enum(['random', 'round_robin', 'cache_aware', 'power_of_two']).default('cache_aware'),
    args: z.record(z.string(), ServerArgValueSchema).default({}),
  })
  .strict();
export type RouterSpec = z.infer<typeof RouterSpecSchema>;

export const InferenceModelSpecSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._-]*$/,
        'use letters, digits, ".", "_" or "-" (it appears in URLs and engine ids)',
      ),
    model_path: z.string().min(1),
    /** Name the engine reports in /v1/models; defaults to `name`. */
    served_model_name: z.string().min(1).optional(),
    engine_groups: z.array(EngineGroupSpecSchema).min(1),
    weight_source: WeightSourceSchema,
    route_mode: RouteModeSchema.default('direct'),
    router: RouterSpecSchema.optional(),
    sampling_defaults: z.record(z.string(), z.unknown()).default({}),
    chat_template_kwargs: z.record(z.string(), z.unknown()).default({}),
    env_vars: z.record(z.string(), z.string()).default({}),
    elastic_enabled: z.boolean().default(false),
    fault_tolerance_enabled: z.boolean().default(false),
    /** Asks for DCS registration / dynamic weight updates; refused for static models. */
    register_dcs: z.boolean().default(false),
    /** How many weight versions a replica may be behind the newest one of the model and still take requests (the
     * bound AReaL calls max_head_offpolicyness): 0 = only replicas on the newest version. Versions that are plain
     * numbers are counted by their difference, others by the distinct versions between (see versionsBehind in
     * @uis/routing). Unset: no bound beyond the model's version. Refused for static models. */
    max_staleness: z.number().int().nonnegative().optional(),
    /** OpenAI streams (`/v1/chat/completions`, `/v1/completions`) of this model say which weights made each chunk
     * and where they changed: the gateway asks the engine for `stream_options.continuous_usage_stats` and rewrites
     * each event (about 2 us of gateway CPU per event; still one write per engine read). false: streams are
     * relayed as the engine sends them, their version in `X-UIS-Weight-Version` only. Static models are never
     * rewritten: their weights never change. */
    openai_stream_versions: z.boolean().default(true),
    /** The key this model's engines check (SGLang `--api-key`): launched engines get it, and the gateway and the
     * manager send it as their bearer token. Clients never see it, and their own credentials never reach an
     * engine. */
    engine_api_key: z.string().min(1).optional(),
    /** The SGLang release this model's engines run (e.g. `0.5.17`): its launch flags are checked against that
     * release's surface before any engine starts. Default: the newest release uis supports. */
    sglang_version: z
      .string()
      .regex(/^\d+\.\d+\.\d+([.-]?[A-Za-z0-9]+)*$/, 'an SGLang release such as 0.5.17 or 0.5.10.post1')
      .optional(),
    /** Weight bytes, KV-cache share and CUDA-graph reserve: what the planner needs to release only what must go
     * at a phase switch. Without it the model releases every tag at every switch. */
    memory: ModelMemorySchema.optional(),
    /** The built-in autoscaler for this model (an `elastic_enabled` one); off without it. */
    autoscale: AutoscaleSpecSchema.optional(),
  })
  .strict();
export type InferenceModelSpec = z.infer<typeof InferenceModelSpecSchema>;

export const InferenceRoleSpecSchema = z
  .object({
    role: RoleSchema,
    workload: WorkloadTypeSchema,
    deployment: DeploymentSpecSchema,
    routing: RoutingSpecSchema,
    models: z.array(InferenceModelSpecSchema).min(1),
    expose_engine_urls: z.boolean().default(true),
  })
  .strict();
export type InferenceRoleSpec = z.infer<typeof InferenceRoleSpecSchema>;

export const ModelPlacementSchema = z
  .object({
    pg_owner: PgOwnerSchema,
    bundle_indices: z.array(z.number().int().nonnegative()),
    gpu_ids: z.array(z.number().int().nonnegative()),
    activation_group: z.string().nullable(),
    activation_phase: z.string().nullable(),
  })
  .strict();
export type ModelPlacement = z.infer<typeof ModelPlacementSchema>;

/** Derived capabilities of the RFC. */
export interface ModelCapabilities {
  needs_weight_update: boolean;
  needs_dcs: boolean;
  needs_router: boolean;
}

export function capabilities(
  model: Pick<InferenceModelSpec, 'weight_source' | 'route_mode'>,
): ModelCapabilities {
  return {
    needs_weight_update: model.weight_source !== 'static',
    needs_dcs: model.weight_source === 'dcs',
    needs_router: model.route_mode === 'sglang_router',
  };
}

export function servedModelName(model: Pick<InferenceModelSpec, 'name' | 'served_model_name'>): string {
  return model.served_model_name ?? model.name;
}

/** Engine ids are `<model>/<replica index>` as in the RFC example (`math-teacher/0`). */
export function engineId(model: string, replica: number): string {
  return `${model}/${replica}`;
}
