import type { DiscoverySnapshot, GroupPlacement } from '@uis/spec';

/** Relax Rollout's `GET /rollout/engines` answer (`?schema=1`), kept while callers migrate to the RFC schema. */
export interface LegacyEngines {
  models: Record<
    string,
    {
      router_ip: string | null;
      router_port: number | null;
      engine_groups: Array<{
        group_index: number;
        worker_type: string;
        num_gpus_per_engine: number;
        num_new_engines: number;
        engines: Array<{
          rank: number;
          status: 'active' | 'dead';
          url: string | null;
          pid: number | null;
          node_id: string;
        }>;
      }>;
      total_engines: number;
    }
  >;
  total_engines: number;
}

/**
 * Converts the discovery snapshot to the legacy shape. Every node of a multi-node engine is listed (Relax lists
 * one row per node), only the head (node rank 0) has a url. A replica is `active` unless it is dead: Relax had no
 * sleeping state, and its callers read status only to skip dead engines.
 */
export function legacyEngines(
  snapshot: DiscoverySnapshot,
  placements: readonly GroupPlacement[],
  pids: (engineId: string) => readonly number[],
  modelName?: string,
): LegacyEngines {
  const out: LegacyEngines = { models: {}, total_engines: 0 };
  for (const [name, model] of Object.entries(snapshot.models)) {
    if (modelName !== undefined && name !== modelName) continue;
    const router = model.router_url === null ? null : new URL(model.router_url);
    const byId = new Map(model.engines.map((e) => [e.engine_id, e]));
    const groups: LegacyEngines['models'][string]['engine_groups'] = [];
    let total = 0;
    for (const p of placements) {
      if (p.model !== name) continue;
      const engines: LegacyEngines['models'][string]['engine_groups'][number]['engines'] = [];
      p.replicas.forEach((r, rank) => {
        const published = byId.get(r.engine_id);
        if (published === undefined) return;
        const procs = pids(r.engine_id);
        for (const node of r.nodes) {
          engines.push({
            rank,
            status: published.state === 'dead' ? 'dead' : 'active',
            url: node.node_rank === 0 ? published.base_url : null,
            pid: procs[node.node_rank] ?? null,
            node_id: node.node,
          });
        }
        total++;
      });
      groups.push({
        group_index: p.group,
        worker_type: p.worker_type,
        num_gpus_per_engine: p.gpus_per_engine,
        num_new_engines: p.worker_type === 'placeholder' ? 0 : p.replicas.length,
        engines,
      });
    }
    // Engines attached at run time (external, elastic) have no placement group: list them as their own group.
    const placed = new Set(placements.flatMap((p) => p.replicas.map((r) => r.engine_id)));
    const extra = model.engines.filter((e) => !placed.has(e.engine_id));
    if (extra.length > 0) {
      groups.push({
        group_index: groups.length,
        worker_type: 'regular',
        num_gpus_per_engine: 0,
        num_new_engines: extra.length,
        engines: extra.map((e, rank) => ({
          rank,
          status: e.state === 'dead' ? 'dead' : 'active',
          url: e.base_url,
          pid: pids(e.engine_id)[0] ?? null,
          node_id: e.base_url === null ? 'external' : new URL(e.base_url).hostname,
        })),
      });
      total += extra.length;
    }
    out.models[name] = {
      router_ip: router?.hostname ?? null,
      router_port: router === null ? null : Number(router.port || (router.protocol === 'https:' ? 443 : 80)),
      engine_groups: groups,
      total_engines: total,
    };
    out.total_engines += total;
  }
  return out;
}
