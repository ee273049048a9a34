import type {
  DiscoveryEngine,
  DiscoverySnapshot,
  GroupPlacement,
  LegacyEngineGroup,
  LegacyGenrmInstance,
  LegacyModelFields,
  LegacyWorker,
} from '@uis/spec';

/** Relax's legacy `GET /<role>/engines` answer (`?schema=1`); GenRM adds `instances`. */
export interface LegacyEngines {
  models: Record<string, LegacyModelFields>;
  total_engines: number;
  /** GenRM only: Relax's GenRM readers look for engines here, as host and port. */
  instances?: Record<string, LegacyGenrmInstance>;
}

export interface LegacyOptions {
  /** Only this model (`?model_name=`); ranks stay those of the whole role. */
  modelName?: string | undefined;
  /** Add GenRM's `instances` (the `/genrm/engines` answer). */
  genrm?: boolean;
}

/** One worker row, keys absent (never null) where Relax omits them: a dead worker has no pid or node_id, only the
 * head of an engine has a url, and only if the engine has an address. */
function worker(
  rank: number,
  engine: DiscoveryEngine,
  head: boolean,
  pid: number | undefined,
  node: string | undefined,
): LegacyWorker {
  const dead = engine.state === 'dead';
  const row: LegacyWorker = { rank, status: dead ? 'dead' : 'active' };
  if (!dead && pid !== undefined) row.pid = pid;
  if (!dead && node !== undefined) row.node_id = node;
  if (head && engine.base_url !== null) row.url = engine.base_url;
  return row;
}

function routerAddress(routerUrl: string | null): Pick<LegacyModelFields, 'router_ip' | 'router_port'> {
  if (routerUrl === null) return { router_ip: null, router_port: null };
  const url = new URL(routerUrl);
  return {
    router_ip: url.hostname,
    router_port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
  };
}

/**
 * Converts the discovery snapshot to Relax's legacy shape. Every node of a multi-node engine is a worker row (Relax
 * lists one per node). Ranks are those of Relax: global over the role, a group's rows numbered from its rank offset
 * (the rows of every group before it, in placement order, whatever the model), so the ids Relax's autoscaler builds
 * (`engine_<rank>`) are unique across models and do not move with `?model_name=`. Engines attached at run time
 * (external, elastic) have no placement: they are their own group per model, ranked after every placed row. A
 * replica is `active` unless it is dead: Relax had no sleeping state, and its readers skip only dead engines.
 * `total_engines` counts rows, as Relax does.
 */
export function legacyEngines(
  snapshot: DiscoverySnapshot,
  placements: readonly GroupPlacement[],
  pids: (engineId: string) => readonly number[],
  options: LegacyOptions = {},
): LegacyEngines {
  const groups = new Map<string, LegacyEngineGroup[]>();
  const placed = new Set<string>();
  let rank = 0;
  for (const p of placements) {
    const published = new Map((snapshot.models[p.model]?.engines ?? []).map((e) => [e.engine_id, e]));
    const rows: LegacyWorker[] = [];
    for (const r of p.replicas) {
      placed.add(r.engine_id);
      const engine = published.get(r.engine_id);
      const procs = pids(r.engine_id);
      for (const node of r.nodes) {
        // An unpublished replica (a placeholder) still holds its ranks, as Relax's empty slots do.
        const slot = rank++;
        if (engine === undefined) continue;
        rows.push(worker(slot, engine, node.node_rank === 0, procs[node.node_rank], node.node));
      }
    }
    if (!Object.hasOwn(snapshot.models, p.model)) continue;
    const list = groups.get(p.model) ?? [];
    list.push({
      group_index: p.group,
      worker_type: p.worker_type,
      num_gpus_per_engine: p.gpus_per_engine,
      num_new_engines: p.worker_type === 'placeholder' ? 0 : p.replicas.length,
      engines: rows,
    });
    groups.set(p.model, list);
  }
  for (const [name, model] of Object.entries(snapshot.models)) {
    const extra = model.engines.filter((e) => !placed.has(e.engine_id));
    if (extra.length === 0) continue;
    const list = groups.get(name) ?? [];
    list.push({
      group_index: list.length === 0 ? 0 : Math.max(...list.map((g) => g.group_index)) + 1,
      worker_type: 'regular',
      num_gpus_per_engine: 0,
      num_new_engines: extra.length,
      engines: extra.map((e) =>
        worker(
          rank++,
          e,
          true,
          pids(e.engine_id)[0],
          e.base_url === null ? undefined : new URL(e.base_url).hostname,
        ),
      ),
    });
    groups.set(name, list);
  }

  const out: LegacyEngines = { models: {}, total_engines: 0 };
  for (const [name, model] of Object.entries(snapshot.models)) {
    if (options.modelName !== undefined && name !== options.modelName) continue;
    const engineGroups = groups.get(name) ?? [];
    const total = engineGroups.reduce((n, g) => n + g.engines.length, 0);
    out.models[name] = {
      ...routerAddress(model.router_url),
      engine_groups: engineGroups,
      total_engines: total,
    };
    out.total_engines += total;
  }
  if (options.genrm === true) out.instances = genrmInstances(snapshot, options.modelName);
  return out;
}

/** GenRM's legacy discovery: per model, its live engines that have an address, as host and port (an IPv6 host keeps
 * its brackets, so `http://{host}:{port}` is a valid URL again). */
export function genrmInstances(
  snapshot: DiscoverySnapshot,
  modelName?: string,
): Record<string, LegacyGenrmInstance> {
  const instances: Record<string, LegacyGenrmInstance> = {};
  for (const [name, model] of Object.entries(snapshot.models)) {
    if (modelName !== undefined && name !== modelName) continue;
    const engines: LegacyGenrmInstance['engines'] = [];
    for (const e of model.engines) {
      if (e.state === 'dead' || e.base_url === null) continue;
      const url = new URL(e.base_url);
      engines.push({ host: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) });
    }
    instances[name] = { engines };
  }
  return instances;
}

/**
 * The default `GET /<role>/engines` answer (the RFC's additive migration phase): the schema-2 snapshot with Relax's
 * legacy fields beside its own, so schema-2 clients and Relax's existing readers parse one document. Per model:
 * `router_ip`, `router_port`, `engine_groups`, `total_engines`; top level: `total_engines` (and `instances` on
 * GenRM). No legacy key shares a name with a schema-2 key.
 */
export function additiveDiscovery(snapshot: DiscoverySnapshot, legacy: LegacyEngines): DiscoverySnapshot {
  const models: DiscoverySnapshot['models'] = {};
  for (const [name, fields] of Object.entries(legacy.models)) {
    const model = snapshot.models[name];
    if (model !== undefined) models[name] = { ...model, ...fields };
  }
  return {
    ...snapshot,
    models,
    total_engines: legacy.total_engines,
    ...(legacy.instances === undefined ? {} : { instances: legacy.instances }),
  };
}
