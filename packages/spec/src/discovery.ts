import { z } from 'zod';
import {
  EngineWorkerTypeSchema,
  ReplicaPolicySchema,
  RoleSchema,
  RouteModeSchema,
  WeightSourceSchema,
} from './model.ts';
import { ReplicaStateSchema } from './states.ts';

/** An engine URL: http(s) with a host, no credentials, query or fragment (it is published to every client). */
export const EngineUrlSchema = z.string().superRefine((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: `not a URL: ${JSON.stringify(value)}` });
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    ctx.addIssue({ code: 'custom', message: `URL must be http or https, got ${url.protocol}` });
  }
  if (!url.hostname) ctx.addIssue({ code: 'custom', message: 'URL must have a host' });
  if (url.username || url.password)
    ctx.addIssue({ code: 'custom', message: 'URL must not carry credentials' });
  if (url.search || value.includes('?'))
    ctx.addIssue({ code: 'custom', message: 'URL must not have a query' });
  if (url.hash || value.includes('#'))
    ctx.addIssue({ code: 'custom', message: 'URL must not have a fragment' });
});

/** A host name, an IPv4 address, or an IPv6 address in brackets (RegExp source, for `host:port` patterns). */
export const HOST_PATTERN = String.raw`(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])`;

/** `host:port` as Relax writes engine addresses (`--rollout-external-engine-addrs h1:30000`); without this rule
 * `new URL` would read `h1:` as a scheme. */
const HOST_PORT = new RegExp(`^${HOST_PATTERN}:\\d{1,5}$`);

/** An engine address from a config file: an http(s) URL, or Relax's `host:port` (read as `http://host:port`). */
export const EngineAddressSchema = z
  .string()
  .transform((value) => (HOST_PORT.test(value) ? `http://${value}` : value))
  .pipe(EngineUrlSchema);

/** The gateway's circuit breaker of a replica: `closed` (routed to), `open` (skipped after consecutive failures),
 * `half_open` (one request probes it). */
export const CircuitStateSchema = z.enum(['closed', 'open', 'half_open']);
export type CircuitState = z.infer<typeof CircuitStateSchema>;

export const DiscoveryEngineSchema = z
  .object({
    engine_id: z.string().min(1),
    base_url: EngineUrlSchema.nullable(),
    state: ReplicaStateSchema,
    direct_eligible: z.boolean(),
    /** Additive: the weight version this replica serves (async RL bounds staleness with it). */
    weight_version: z.string().nullable().optional(),
    /** Additive: the engine group and worker type; PD prefill/decode workers are diagnostic only. */
    group: z.number().int().nonnegative().optional(),
    worker_type: EngineWorkerTypeSchema.optional(),
    /** Additive: incarnation counter of this replica slot; moves on restart. */
    generation: z.number().int().nonnegative().optional(),
    /** Additive: the SGLang release the engine runs (its server info `version`), once it was healthy. */
    sglang_version: z.string().optional(),
    /** Additive: its update failed in a weight switch; never direct-eligible until an operator restarts it. */
    quarantined: z.boolean().optional(),
    /** Additive, set by the gateway at answer time: this replica's circuit there. Absent for a model routed by an
     * SGLang router (the router picks its workers) and in the registry's own snapshots. A circuit change does not
     * move `topology_revision`. */
    circuit: CircuitStateSchema.optional(),
  })
  .superRefine((engine, ctx) => {
    if (engine.direct_eligible && engine.state !== 'ready') {
      ctx.addIssue({
        code: 'custom',
        path: ['direct_eligible'],
        message: `direct_eligible can only be true for a ready replica (state is ${engine.state})`,
      });
    }
    if (engine.direct_eligible && engine.base_url === null) {
      ctx.addIssue({
        code: 'custom',
        path: ['direct_eligible'],
        message: 'direct_eligible needs a base_url',
      });
    }
  });
export type DiscoveryEngine = z.infer<typeof DiscoveryEngineSchema>;

/** One worker row of Relax's legacy `engine_groups` (one per node of an engine). `rank` is global across the
 * role (the group's rank offset + the worker's slot), so `engine_<rank>` is unique across models. Keys are absent,
 * never null, where Relax omits them: `url` on non-head workers and engines without an address, `pid`/`node_id`
 * on dead workers. */
export const LegacyWorkerSchema = z.object({
  rank: z.number().int().nonnegative(),
  status: z.enum(['active', 'dead']),
  url: z.string().optional(),
  pid: z.number().int().optional(),
  node_id: z.string().optional(),
});
export type LegacyWorker = z.infer<typeof LegacyWorkerSchema>;

/** One engine group of Relax's legacy discovery answer. */
export const LegacyEngineGroupSchema = z.object({
  group_index: z.number().int().nonnegative(),
  worker_type: z.string(),
  num_gpus_per_engine: z.number().int().nonnegative(),
  num_new_engines: z.number().int().nonnegative(),
  engines: z.array(LegacyWorkerSchema),
});
export type LegacyEngineGroup = z.infer<typeof LegacyEngineGroupSchema>;

/** Relax's per-model legacy fields, served beside the schema-2 ones by default and alone with `?schema=1`.
 * `total_engines` counts worker rows, as Relax does. */
export const LegacyModelFieldsSchema = z.object({
  router_ip: z.string().nullable(),
  router_port: z.number().int().nullable(),
  engine_groups: z.array(LegacyEngineGroupSchema),
  total_engines: z.number().int().nonnegative(),
});
export type LegacyModelFields = z.infer<typeof LegacyModelFieldsSchema>;

/** Relax GenRM's legacy discovery: per model (instance), the live engines with an address as host and port. */
export const LegacyGenrmInstanceSchema = z.object({
  engines: z.array(z.object({ host: z.string(), port: z.number().int().positive() })),
});
export type LegacyGenrmInstance = z.infer<typeof LegacyGenrmInstanceSchema>;

export const DiscoveryModelSchema = z.object({
  state: ReplicaStateSchema,
  router_url: EngineUrlSchema.nullable(),
  engines: z.array(DiscoveryEngineSchema),
  /** Additive: the model's target weight version; replicas below it are not eligible. */
  weight_version: z.string().nullable().optional(),
  /** Additive: the model's `max_staleness` (absent: none): a replica more versions than this behind the newest
   * version among the model's eligible replicas (and the model's own) is not eligible. */
  max_staleness: z.number().int().nonnegative().optional(),
  /** Additive: the name engines answer to (`model` is rewritten to it). */
  served_model_name: z.string().optional(),
  /** Additive: an operator drained the model; phase changes leave it asleep until an operator activates it. */
  held: z.boolean().optional(),
  /** Additive (Relax's schema-2 readers check it before routing): the model takes requests now, i.e. it is ready
   * and has its router or an eligible replica. */
  admission: z.boolean().optional(),
  /** Additive (the RFC's internal model): how requests reach the model, and where its weights come from. */
  route_mode: RouteModeSchema.optional(),
  weight_source: WeightSourceSchema.optional(),
  /** Additive (Relax's legacy readers): router address, engine groups with their worker rows, worker count. */
  router_ip: LegacyModelFieldsSchema.shape.router_ip.optional(),
  router_port: LegacyModelFieldsSchema.shape.router_port.optional(),
  engine_groups: LegacyModelFieldsSchema.shape.engine_groups.optional(),
  total_engines: LegacyModelFieldsSchema.shape.total_engines.optional(),
});
export type DiscoveryModel = z.infer<typeof DiscoveryModelSchema>;

export const DiscoveryRoutingSchema = z.object({
  default_model: z.string().nullable(),
  route_keys: z.record(z.string(), z.string()),
  /** Additive (Relax's schema-2 readers): `route_keys` plus every model under its own name, the route keys the
   * resolver accepts (a route key naming a model selects it, as Relax does for GenRM instances). */
  route_key_to_model: z.record(z.string(), z.string()).optional(),
  aliases: z.record(z.string(), z.string()),
  policy: ReplicaPolicySchema,
  model_policies: z.record(z.string(), ReplicaPolicySchema),
});
export type DiscoveryRouting = z.infer<typeof DiscoveryRoutingSchema>;

/** `GET /<role>/engines`: exactly the RFC example's fields plus additive ones. `schema_version` lets clients
 * detect a breaking change; `registry_epoch` changes when the manager restarts (revisions restart with it, so a
 * client compares (epoch, revision), never the revision alone); `routing` carries the rules so a direct client
 * resolves models exactly as the gateway does. */
export const DiscoverySnapshotSchema = z.object({
  schema_version: z.literal(2).optional(),
  role: RoleSchema,
  topology_revision: z.number().int().nonnegative(),
  registry_epoch: z.string().min(1).optional(),
  /** Additive: `registry_epoch` under the name Relax's schema-2 readers require. */
  manager_epoch: z.string().min(1).optional(),
  phase: z.string().nullable(),
  models: z.record(z.string(), DiscoveryModelSchema),
  routing: DiscoveryRoutingSchema.optional(),
  /** Additive (Relax's legacy readers): worker rows over every model listed. */
  total_engines: z.number().int().nonnegative().optional(),
  /** Additive, GenRM only (Relax's GenRM readers): per model, its live engines as host and port. */
  instances: z.record(z.string(), LegacyGenrmInstanceSchema).optional(),
});
export type DiscoverySnapshot = z.infer<typeof DiscoverySnapshotSchema>;
export const DISCOVERY_SCHEMA_VERSION = 2 as const;

/** The RFC's example, kept as a fixture: it must always parse. */
export const RFC_DISCOVERY_EXAMPLE = {
  role: 'teacher',
  topology_revision: 7,
  phase: 'deferred_score',
  models: {
    'math-teacher': {
      state: 'ready',
      router_url: null,
      engines: [
        {
          engine_id: 'math-teacher/0',
          base_url: 'http://node-1:15000',
          state: 'ready',
          direct_eligible: true,
        },
      ],
    },
  },
} as const;
