import type { InferenceManager } from '@uis/manager';
import { candidatesOf } from '@uis/routing';
import {
  type CircuitState,
  type DiscoverySnapshot,
  type GroupPlacement,
  type InferenceModelSpec,
  ROLE_CAPABILITIES,
  type Role,
  retryGuidance,
  type UisError,
  zodError,
} from '@uis/spec';
import type { Hono } from 'hono';
import { z } from 'zod';
import { errorJson, rolePaths } from '../proxy/index.ts';
import { authorized, unauthorized } from './auth.ts';
import { additiveDiscovery, legacyEngines } from './legacy-engines.ts';

export const EngineQuerySchema = z.object({
  // Decimal digits only: `Number()` would read '' as 0 and '0x10' as 16, answering a revision nobody asked for.
  wait_revision: z
    .string()
    .regex(/^\d{1,15}$/, 'must be a topology revision: a non-negative decimal integer')
    .transform(Number)
    .optional(),
  timeout_s: z
    .string()
    .trim()
    .min(1, 'must be a number of seconds')
    .transform(Number)
    .pipe(z.number().nonnegative())
    .optional(),
  schema: z.enum(['1', '2']).optional(),
  /** Another spelling Relax callers use for `schema`. */
  schema_version: z.enum(['1', '2']).optional(),
  model_name: z.string().min(1).optional(),
  /** The epoch the client's `wait_revision` belongs to: revisions restart with a new registry, so a client that
   * saw another epoch gets the current snapshot at once instead of waiting for a revision that may never come. */
  registry_epoch: z.string().min(1).optional(),
});
export const HealthQuerySchema = z.object({
  schema: z.enum(['1', '2']).optional(),
  schema_version: z.enum(['1', '2']).optional(),
});

const queryError = (error: z.ZodError): UisError => zodError(error, 'query', 'invalid_query');

/** What a role's read routes need from its gateway. */
export interface ReadRouteDeps {
  role: string;
  manager: InferenceManager;
  /** The role's aliases (alias -> model), listed by `/v1/models`. */
  aliases: Readonly<Record<string, string>>;
  placements: readonly GroupPlacement[];
  /** The role's models (GenRM's `/metrics` names each one's model path). */
  models: readonly Pick<InferenceModelSpec, 'name' | 'model_path'>[];
  servingTokens: readonly string[];
  maxWaitSeconds: number;
  /** A replica's circuit at this gateway, shown on the schema-2 engine entries of discovery. */
  circuitOf: (engineId: string) => CircuitState;
}

/** The OpenAI model list of a role: model ids (`root` = served name, `state`) and aliases (`alias_of`). */
export function modelList(snapshot: DiscoverySnapshot, aliases: Readonly<Record<string, string>>) {
  const created = Math.floor(Date.now() / 1000);
  const data: Array<Record<string, unknown>> = Object.entries(snapshot.models).map(([name, m]) => ({
    id: name,
    object: 'model',
    created,
    owned_by: 'uis',
    root: m.served_model_name ?? name,
    state: m.state,
  }));
  for (const [alias, target] of Object.entries(aliases)) {
    if (Object.hasOwn(snapshot.models, alias)) continue;
    data.push({ id: alias, object: 'model', created, owned_by: 'uis', root: target, alias_of: target });
  }
  return { object: 'list' as const, data };
}

/** Discovery (long-poll, legacy shape), health and the model list of one role, on Hono. */
export function mountReadRoutes(app: Hono, deps: ReadRouteDeps): void {
  const base = `/${deps.role}`;
  const paths = rolePaths(deps.role);
  if (deps.servingTokens.length > 0) {
    const tokens = deps.servingTokens;
    app.use(`${base}/*`, async (c, next) => {
      if (!authorized(c.req.header('authorization'), tokens)) {
        return errorJson(c, unauthorized(`${deps.role} discovery`));
      }
      await next();
    });
  }
  app.get(paths.engines, async (c) => {
    const q = EngineQuerySchema.safeParse(c.req.query());
    if (!q.success) return errorJson(c, queryError(q.error));
    const { wait_revision, timeout_s, model_name, registry_epoch } = q.data;
    const schema = q.data.schema ?? q.data.schema_version;
    const registry = deps.manager.registry;
    let snapshot = registry.snapshot();
    const sameEpoch = registry_epoch === undefined || registry_epoch === snapshot.registry_epoch;
    if (wait_revision !== undefined && sameEpoch && snapshot.topology_revision <= wait_revision) {
      const seconds = Math.min(timeout_s ?? 30, deps.maxWaitSeconds);
      // Woken by the registry's publication (subscribe), not by polling; a client that leaves ends the wait.
      snapshot = await registry.waitForRevision(wait_revision + 1, seconds * 1000, c.req.raw.signal);
    }
    const pids = pidsOf(deps.manager, deps.placements);
    const genrm = ROLE_CAPABILITIES[deps.role as Role].messageAdapter === 'genrm_messages';
    const legacy = legacyEngines(snapshot, deps.placements, pids, { modelName: model_name, genrm });
    if (schema === '1') return c.json(legacy);
    const ours = withCircuits(snapshot, deps.circuitOf);
    if (schema === '2') return c.json(schema2Only(ours, model_name));
    // The RFC's additive phase: schema-2 clients and Relax's legacy readers parse the same default answer.
    return c.json(additiveDiscovery(ours, legacy));
  });
  app.get(paths.health, (c) => {
    const q = HealthQuerySchema.safeParse(c.req.query());
    if (!q.success) return errorJson(c, queryError(q.error));
    const snapshot = deps.manager.registry.snapshot();
    const models: Record<string, unknown> = {};
    const instances: Record<string, { status: 'healthy' | 'unhealthy' }> = {};
    let anyServing = false;
    for (const [name, m] of Object.entries(snapshot.models)) {
      const eligible = candidatesOf(m).length;
      const canServe = m.router_url !== null ? m.state === 'ready' : m.state === 'ready' && eligible > 0;
      anyServing ||= canServe;
      instances[name] = { status: canServe ? 'healthy' : 'unhealthy' };
      const guidance = retryGuidance(m.state, m.held === true);
      models[name] = {
        state: m.state,
        can_serve: canServe,
        replicas: m.engines.length,
        eligible_replicas: eligible,
        weight_version: m.weight_version ?? null,
        ...(canServe ? {} : { reason: guidance.reason, retry_after_s: guidance.retryAfterSeconds }),
      };
    }
    // Relax's status words, as its health readers take them: healthy when every model can serve now, so a role
    // asleep in another phase reads unhealthy (the gateway itself answers: `gateway_status`).
    const names = Object.keys(instances);
    const healthy = names.length > 0 && names.every((n) => instances[n]!.status === 'healthy');
    const relaxStatus = { status: healthy ? 'healthy' : 'unhealthy', service: deps.role };
    if ((q.data.schema ?? q.data.schema_version) === '1') return c.json(relaxStatus);
    return c.json({
      ...relaxStatus,
      gateway_status: 'healthy',
      instances,
      role: deps.role,
      phase: snapshot.phase,
      topology_revision: snapshot.topology_revision,
      registry_epoch: snapshot.registry_epoch ?? null,
      can_serve: anyServing,
      models,
    });
  });
  app.get(paths.models, (c) => c.json(modelList(deps.manager.registry.snapshot(), deps.aliases)));
  if (ROLE_CAPABILITIES[deps.role as Role].messageAdapter === 'genrm_messages') {
    app.get(`/${deps.role}/metrics`, (c) => c.json(genrmMetrics(deps)));
  }
}

/** Relax GenRM's `/metrics`: per instance (model) its model path, GPUs and engines as planned; with one instance
 * its fields also at the top level, where Relax's single-instance service puts them. */
function genrmMetrics(deps: ReadRouteDeps): Record<string, unknown> {
  const instances: Record<string, { model_path: string; num_gpus: number; num_engines: number }> = {};
  for (const m of deps.models) {
    const groups = deps.placements.filter((p) => p.model === m.name && p.worker_type !== 'placeholder');
    instances[m.name] = {
      model_path: m.model_path,
      num_gpus: groups.reduce((n, p) => n + p.num_gpus, 0),
      num_engines: groups.reduce((n, p) => n + p.replicas.length, 0),
    };
  }
  const only = Object.values(instances);
  return { service: deps.role, ...(only.length === 1 ? only[0] : {}), instances };
}

/** Each replica's circuit at this gateway on its schema-2 entry (never on Relax's legacy rows), read at answer
 * time. A model an SGLang router serves has none: the router picks its workers, the gateway keeps no circuit. */
function withCircuits(
  snapshot: DiscoverySnapshot,
  circuitOf: (engineId: string) => CircuitState,
): DiscoverySnapshot {
  const models: DiscoverySnapshot['models'] = {};
  for (const [name, m] of Object.entries(snapshot.models)) {
    models[name] =
      m.router_url !== null
        ? m
        : { ...m, engines: m.engines.map((e) => ({ ...e, circuit: circuitOf(e.engine_id) })) };
  }
  return { ...snapshot, models };
}

/** `?schema=2`: the schema-2 fields alone (for clients that want the lean document). */
function schema2Only(snapshot: DiscoverySnapshot, modelName: string | undefined): DiscoverySnapshot {
  if (modelName === undefined) return snapshot;
  const entry = snapshot.models[modelName];
  return { ...snapshot, models: entry === undefined ? {} : { [modelName]: entry } };
}

/** Each replica's process ids (one per node), read once per answer: the default answer lists them too. A launched
 * replica without processes of its own runs inside this one (the in-process simulator of `uis demo`): its rows carry
 * this process's pid, as Relax's rows carry the pid serving them. An attached (external) engine has none to give. */
function pidsOf(
  manager: InferenceManager,
  placements: readonly GroupPlacement[],
): (engineId: string) => readonly number[] {
  const nodes = new Map<string, number>();
  for (const p of placements) for (const r of p.replicas) nodes.set(r.engine_id, r.nodes.length);
  const pids = new Map<string, readonly number[]>();
  for (const m of Object.values(manager.snapshot().models)) {
    for (const r of m.replicas) {
      const inProcess = r.pids.length === 0 && !r.external && r.state !== 'dead';
      pids.set(r.engine_id, inProcess ? Array(nodes.get(r.engine_id) ?? 1).fill(process.pid) : r.pids);
    }
  }
  return (engineId) => pids.get(engineId) ?? [];
}
