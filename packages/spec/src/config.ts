import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import { EngineAddressSchema } from './discovery.ts';
import type { ErrorCode } from './error-codes.ts';
import { formatPath, issueCode, type PathIssue, UisError } from './errors.ts';
import { GatewayConfigSchema } from './gateway-config.ts';
import { DeferOrderSchema, GpuTypeSchema } from './memory.ts';
import {
  DEFAULT_WORKLOAD,
  type InferenceRoleSpec,
  InferenceRoleSpecSchema,
  ROLES,
  type Role,
  RoleSchema,
  RoutingSpecSchema,
  WorkloadTypeSchema,
} from './model.ts';

/** The user-facing config file: cluster inventory + training + roles + defer schedule, one YAML or JSON document.
 * Every schema is strict so a misspelt field is an error with its path, never silently ignored. */

const positiveInt = z.number().int().positive();
const nonNegativeInt = z.number().int().nonnegative();

/** Bounds that keep planning fast (a million GPUs plan in about a second) and catch a mistyped count early. */
export const MAX_GPUS_PER_NODE = 1024;
export const MAX_CLUSTER_GPUS = 1 << 20;

export const ClusterNodeSchema = z
  .object({
    name: z.string().min(1),
    gpus: positiveInt.max(MAX_GPUS_PER_NODE),
    ip: z.string().min(1).optional(),
    /** The node's GPU type (memory, copy speeds): a name in `cluster.gpu_types`, or the built-in `h200`. */
    gpu_type: z.string().min(1).optional(),
  })
  .strict();
export type ClusterNode = z.infer<typeof ClusterNodeSchema>;

/** A physical binding of one PG bundle to a GPU, as Ray reports it once the PG is placed. */
export const BundleBindingSchema = z
  .object({
    /** Pool the bundle belongs to (`actor` for the colocated pool, else the role name). */
    pool: z.string().min(1).default('actor'),
    bundle_index: nonNegativeInt,
    node: z.string().min(1),
    gpu_id: nonNegativeInt,
  })
  .strict();
export type BundleBinding = z.infer<typeof BundleBindingSchema>;

export const ClusterSchema = z
  .object({
    nodes: z.array(ClusterNodeSchema).min(1),
    bindings: z.array(BundleBindingSchema).default([]),
    /** GPU types by name (the built-in `h200` may be redefined here). */
    gpu_types: z.record(z.string(), GpuTypeSchema).optional(),
  })
  .strict()
  .superRefine((cluster, ctx) => {
    // A node over its own bound is already reported at its path.
    if (cluster.nodes.some((node) => !(node.gpus <= MAX_GPUS_PER_NODE))) return;
    const total = cluster.nodes.reduce((sum, node) => sum + node.gpus, 0);
    if (total > MAX_CLUSTER_GPUS)
      ctx.addIssue({
        code: 'custom',
        path: ['nodes'],
        message: `the nodes hold ${total} GPUs, more than the ${MAX_CLUSTER_GPUS} a plan supports; check the gpus counts`,
      });
  });
export type Cluster = z.infer<typeof ClusterSchema>;

export const TrainingSchema = z
  .object({
    /** GPUs of the actor PG; colocated roles take slices of it. */
    actor_gpus: nonNegativeInt.default(0),
    /** A critic with as many GPUs as the actor shares the actor PG when colocated (as in Relax). */
    critic_gpus: nonNegativeInt.default(0),
    /** A reference model and an actor_fwd (old log-probs) worker on their own PGs (Relax's fully-async roles). */
    reference_gpus: nonNegativeInt.default(0),
    actor_fwd_gpus: nonNegativeInt.default(0),
    /** Training releases its GPU memory between phases (needed wherever inference shares its GPUs). */
    offload_train: z.boolean().default(false),
    fully_async: z.boolean().default(false),
    /** Relax's hybrid mode: fully-async with colocate runs inference on its own pools. */
    hybrid: z.boolean().default(false),
    /** Share of each actor GPU's memory the trainer holds in its phase; inference may keep what fits beside it.
     * Default: everything the phase-less colocated slices leave (every phased model releases all it holds). */
    memory_share: z.number().min(0).max(1).optional(),
  })
  .strict();
export type Training = z.infer<typeof TrainingSchema>;

export const ConfigRoleSchema = InferenceRoleSpecSchema.omit({ role: true, workload: true })
  .extend({
    workload: WorkloadTypeSchema.optional(),
    /** Every routing field has a default, so a role may leave routing out. */
    routing: RoutingSpecSchema.prefault({}),
    /** First bundle of this role's slice in its pool (default: after the previous colocated role). */
    bundle_offset: nonNegativeInt.optional(),
    /** Engines started elsewhere and attached by URL (Relax `--rollout-external-engine-addrs`, `--opd-teacher-url`):
     * such a role is routed but not placed. */
    external_engine_urls: z.array(EngineAddressSchema).optional(),
    /** GPUs the RL controller still reserves for a role whose engines are attached by URL (Relax keeps an external
     * rollout's `--resource` GPUs as a dedicated placement group): a controller-owned pool, no placements. */
    reserved_gpus: nonNegativeInt.optional(),
    /** Sample field that holds the route key (Relax `--opd-teacher-key`, e.g. `data_source`). */
    route_key_field: z.string().min(1).optional(),
  })
  .strict();
export type ConfigRole = z.infer<typeof ConfigRoleSchema>;
/** A role as written (schema defaults not yet applied). */
export type ConfigRoleInput = z.input<typeof ConfigRoleSchema>;

export const TRAIN_PHASE_RESIDENT = 'train';
export const PhaseResidentSchema = z.enum([...ROLES, TRAIN_PHASE_RESIDENT]);
export type PhaseResident = z.infer<typeof PhaseResidentSchema>;

export const PhaseSchema = z
  .object({
    name: z.string().min(1),
    residents: z.array(PhaseResidentSchema).min(1),
  })
  .strict();
export type Phase = z.infer<typeof PhaseSchema>;

export const ActivationGroupSchema = z
  .object({
    name: z.string().min(1),
    pool: z.string().min(1).default('actor'),
    phases: z.array(PhaseSchema).min(1),
  })
  .strict();
export type ActivationGroup = z.infer<typeof ActivationGroupSchema>;

export const ScheduleSchema = z
  .object({
    activation_groups: z.array(ActivationGroupSchema).default([]),
    /** The deferred phases' order: as written, or chosen (and merged where residents fit together) by the planner
     * to minimise the predicted switch time per step. */
    defer: z
      .object({ order: DeferOrderSchema.default('configured') })
      .strict()
      .optional(),
  })
  .strict();
export type Schedule = z.infer<typeof ScheduleSchema>;

export const RolesConfigSchema = z
  .object({
    rollout: ConfigRoleSchema.optional(),
    genrm: ConfigRoleSchema.optional(),
    teacher: ConfigRoleSchema.optional(),
  })
  .strict();

export const UisConfigSchema = z
  .object({
    version: z.literal(1).default(1),
    cluster: ClusterSchema,
    training: TrainingSchema.default({
      actor_gpus: 0,
      critic_gpus: 0,
      reference_gpus: 0,
      actor_fwd_gpus: 0,
      offload_train: false,
      fully_async: false,
      hybrid: false,
    }),
    roles: RolesConfigSchema,
    schedule: ScheduleSchema.default({ activation_groups: [] }),
    /** Additive: how `uis serve` listens and authenticates (see gateway-config.ts). */
    gateway: GatewayConfigSchema.optional(),
  })
  .strict()
  .superRefine((config, ctx) => {
    for (const role of ROLES) {
      const spec = config.roles[role];
      if (spec === undefined) continue;
      checkRole(role, spec, ctx);
    }
  });
export type UisConfig = z.infer<typeof UisConfigSchema>;

function checkRole(role: Role, spec: ConfigRole, ctx: z.RefinementCtx): void {
  const names = new Set<string>();
  spec.models.forEach((model, i) => {
    if (names.has(model.name)) {
      ctx.addIssue({
        code: 'custom',
        path: ['roles', role, 'models', i, 'name'],
        message: `model name "${model.name}" is used twice in role ${role}; give each model a unique name`,
      });
    }
    names.add(model.name);
    checkAutoscale(model, ['roles', role, 'models', i, 'autoscale'], ctx);
    if (model.weight_source === 'static' && model.max_staleness !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['roles', role, 'models', i, 'max_staleness'],
        message:
          'a static model never changes weight version, so nothing can be stale; remove max_staleness or set weight_source to dcs, disk or tensor',
      });
    }
    if (model.weight_source === 'static' && model.register_dcs) {
      ctx.addIssue({
        code: 'custom',
        path: ['roles', role, 'models', i, 'register_dcs'],
        message:
          'a static model never receives weight updates; remove register_dcs or set weight_source to dcs, disk or tensor',
      });
    }
  });
  const ref = (name: string, path: PropertyKey[]) => {
    if (!names.has(name)) {
      ctx.addIssue({
        code: 'custom',
        path: ['roles', role, 'routing', ...path],
        message: `unknown model "${name}"; use one of: ${[...names].join(', ')}`,
      });
    }
  };
  if (spec.routing.default_model !== undefined) ref(spec.routing.default_model, ['default_model']);
  for (const [key, model] of Object.entries(spec.routing.route_keys)) ref(model, ['route_keys', key]);
  for (const [alias, model] of Object.entries(spec.routing.aliases)) ref(model, ['aliases', alias]);
  // A misspelt model here would silently fall back to the role's policy.
  for (const model of Object.keys(spec.routing.model_policies)) ref(model, ['model_policies', model]);
}

/** An autoscaled model must be elastic, and its bounds must lie within the replicas its plan can hold: the plan's
 * own (never scaled in without force) up to those plus the room its placeholder groups reserve. */
function checkAutoscale(
  model: ConfigRole['models'][number],
  path: PropertyKey[],
  ctx: z.RefinementCtx,
): void {
  const a = model.autoscale;
  if (a === undefined) return;
  const replicas = (type: 'regular' | 'placeholder') =>
    model.engine_groups
      .filter((g) => g.worker_type === type)
      .reduce((n, g) => n + Math.floor(g.num_gpus / g.gpus_per_engine), 0);
  const own = replicas('regular');
  const room = replicas('placeholder');
  const issue = (key: string, message: string) =>
    ctx.addIssue({ code: 'custom', path: [...path, key], message });
  if (!model.elastic_enabled)
    issue(
      'min_replicas',
      'autoscale needs elastic_enabled: true on the model (it scales by scale operations)',
    );
  model.engine_groups.forEach((g, gi) => {
    // The autoscaler reads each engine's /metrics, which SGLang serves only when launched with --enable-metrics.
    if (g.worker_type === 'regular' && g.server_args.enable_metrics !== true)
      ctx.addIssue({
        code: 'custom',
        path: [...path.slice(0, -1), 'engine_groups', gi, 'server_args', 'enable_metrics'],
        message: "an autoscaled model reads its engines' /metrics: set server_args.enable_metrics: true",
      });
  });
  if (a.min_replicas < own)
    issue(
      'min_replicas',
      `min_replicas ${a.min_replicas} is below the plan's ${own} replicas, which are never scaled in without force; use ${own} or more`,
    );
  if (a.max_replicas > own + room)
    issue(
      'max_replicas',
      `max_replicas ${a.max_replicas} exceeds the ${own} planned replicas plus ${room} reserved by placeholder groups; add a placeholder group or use ${own + room} or fewer`,
    );
}

/** The internal-model view of one configured role (what the manager and the gateway consume). */
export function roleSpec(role: Role, spec: ConfigRole): InferenceRoleSpec {
  const {
    bundle_offset: _o,
    external_engine_urls: _u,
    reserved_gpus: _r,
    route_key_field: _k,
    workload,
    ...rest
  } = spec;
  return { ...rest, role, workload: workload ?? DEFAULT_WORKLOAD[role] };
}

/** Every configured role in RFC order (rollout, genrm, teacher). */
export function configuredRoles(config: UisConfig): Array<{ role: Role; spec: ConfigRole }> {
  const out: Array<{ role: Role; spec: ConfigRole }> = [];
  for (const role of RoleSchema.options) {
    const spec = config.roles[role];
    if (spec !== undefined) out.push({ role, spec });
  }
  return out;
}

/** Rewrites zod's terse messages into ones that say what to change. */
function explain(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'unrecognized_keys':
      return `unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}; remove ${issue.keys.length > 1 ? 'them' : 'it'} or fix the spelling`;
    case 'too_small':
      if (issue.origin === 'number') {
        return `must be ${issue.inclusive ? 'at least' : 'greater than'} ${String(issue.minimum)}`;
      }
      return issue.message;
    case 'too_big':
      if (issue.origin === 'number' || issue.origin === 'int') {
        return `must be ${issue.inclusive ? 'at most' : 'less than'} ${String(issue.maximum)}`;
      }
      return issue.message;
    case 'invalid_type':
      if (issue.expected === 'int') return 'must be a whole number (no fractions)';
      return issue.message;
    default:
      return issue.message;
  }
}

/** One issue per problem, each with the path the user wrote (`roles.genrm.models[1].engine_groups[0].tp`). */
export function configIssues(error: z.ZodError, root = ''): PathIssue[] {
  const out: PathIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      // One issue per unknown key so every path is exact.
      for (const key of issue.keys) {
        out.push({
          code: 'unknown_field',
          path: formatPath([...issue.path, key], root),
          message: `unknown field "${key}"; remove it or fix the spelling`,
        });
      }
      continue;
    }
    out.push({
      code: issueCode(issue.code),
      path: formatPath(issue.path, root) || root || '(root)',
      message: explain(issue),
    });
  }
  return out;
}

function configError(code: ErrorCode, issues: PathIssue[], filename: string): UisError {
  return new UisError({
    code,
    path: issues[0]?.path,
    message: `${filename}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
    details: issues,
  });
}

/** Validates an already-parsed document (e.g. from JSON or the legacy adapter). */
export function parseConfig(input: unknown, filename = 'config'): UisConfig {
  const result = UisConfigSchema.safeParse(input);
  if (result.success) return result.data;
  throw configError('invalid_config', configIssues(result.error), filename);
}

/** Parses a YAML or JSON config text; throws a 400 UisError whose `details` list every issue with its path. */
export function loadConfig(text: string, filename = 'config.yaml'): UisConfig {
  let doc: unknown;
  try {
    doc = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (e) {
    const where =
      e instanceof YAMLParseError && e.linePos?.[0]
        ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}`
        : '(document)';
    // The first line without the position the path already gives (`... at line 2, column 7:`).
    const message = (e instanceof Error ? (e.message.split('\n')[0] ?? e.message) : String(e)).replace(
      / at line \d+, column \d+:?$/,
      '',
    );
    throw configError('config_parse_error', [{ code: 'config_parse_error', path: where, message }], filename);
  }
  if (doc === null || doc === undefined || typeof doc !== 'object' || Array.isArray(doc)) {
    const found =
      doc === null || doc === undefined
        ? 'the file is empty'
        : `found ${Array.isArray(doc) ? 'a list' : `a ${typeof doc}`}`;
    throw configError(
      'invalid_config',
      [
        {
          code: 'invalid_config',
          path: '(root)',
          message: `expected a mapping with cluster and roles; ${found}`,
        },
      ],
      filename,
    );
  }
  return parseConfig(doc, filename);
}
