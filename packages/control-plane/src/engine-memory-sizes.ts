import type { InferenceManager } from '@uis/manager';
import { memorySizes, SGLangClient } from '@uis/sglang-engine';
import {
  DEFAULT_GPU_TYPE,
  type GroupMemoryPlan,
  H200,
  type Logger,
  type PlacementPlan,
  parseConfig,
  type UisConfig,
} from '@uis/spec';

/** The memory plan again once the models the config does not size are sized from their running engines: SGLang's
 * `memory_usage` (get_server_info) holds what each engine loaded at start, per GPU, so a model without a `memory`
 * section gets its weight bytes (x its GPUs per engine), its KV cache's share of the GPU and its CUDA graphs from
 * its first engine. Null when nothing was unsized, no engine reports sizes, or the sized plan would reorder phases
 * the coordinator already runs (`defer.order: optimized`). */
export async function memoryFromEngines(
  config: UisConfig,
  plan: PlacementPlan,
  managers: ReadonlyMap<string, InferenceManager>,
  logger: Logger,
  planOf: (config: UisConfig) => PlacementPlan,
): Promise<GroupMemoryPlan[] | null> {
  const unsized = new Set(plan.memory?.flatMap((g) => g.unsized) ?? []);
  if (unsized.size === 0) return null;
  const roles = structuredClone(config.roles) as Record<string, { models: Array<Record<string, unknown>> }>;
  let sized = 0;
  for (const [role, spec] of Object.entries(config.roles)) {
    for (const [i, model] of (spec?.models ?? []).entries()) {
      if (model.memory !== undefined || !unsized.has(model.name)) continue;
      const url = managers.get(role)?.registry.snapshot().models[model.name]?.engines[0]?.base_url;
      if (url == null) continue;
      const client = new SGLangClient(url);
      const sizes = await client
        .serverInfo()
        .then(memorySizes)
        .catch(() => null)
        .finally(() => client.close());
      if (sizes === null) continue;
      const placement = plan.placements.find((p) => p.role === role && p.model === model.name);
      const gpuBytes = gpuMemoryBytes(config, plan, placement);
      const entry = roles[role]?.models[i];
      if (entry === undefined || placement === undefined) continue;
      entry.memory = {
        weight_gb: (sizes.weights * placement.gpus_per_engine) / 1e9,
        kv_cache_share: Math.min(1, sizes.kv_cache / gpuBytes),
        cuda_graph_gb: sizes.cuda_graph / 1e9,
      };
      sized++;
      logger.info({ role, model: model.name, ...sizes }, 'model sized from its engine (SGLang memory_usage)');
    }
  }
  if (sized === 0) return null;
  const next = planOf(parseConfig({ ...config, roles }));
  const phases = (p: PlacementPlan) => JSON.stringify(p.activation_groups.map((g) => g.phases));
  if (phases(next) !== phases(plan)) {
    logger.warn(
      {},
      'sized from the engines the plan would reorder its phases: keeping the unsized memory plan',
    );
    return null;
  }
  return next.memory ?? null;
}

/** GPU memory of the placement's first bundle (its node's GPU type). */
function gpuMemoryBytes(
  config: UisConfig,
  plan: PlacementPlan,
  placement: PlacementPlan['placements'][number] | undefined,
): number {
  const bundle = plan.pools[placement?.pool ?? '']?.bundles[placement?.bundle_indices[0] ?? 0];
  const node = config.cluster.nodes.find((n) => n.name === bundle?.node);
  const type =
    { [DEFAULT_GPU_TYPE]: H200, ...config.cluster.gpu_types }[node?.gpu_type ?? DEFAULT_GPU_TYPE] ?? H200;
  return type.memory_gb * 1e9;
}
