import { z } from 'zod';
import type { ServerInfo } from './protocol.ts';

/** What a running engine's scheduler reports of its GPU memory in get_server_info's `internal_states[i]
 * .memory_usage`, per GPU of the engine, in GiB (SGLang measures free memory before and after each load, / 2^30):
 * `weight` and `kvcache` in every release 0.5.2..0.5.23; `graph` one number up to 0.5.15.post1
 * (`model_runner.graph_mem_usage`), one number per captured phase from 0.5.17 (`build_memory_usage`). They are the
 * sizes loaded at start: a release or resume does not change them. */
export const MemoryUsageSchema = z.looseObject({
  weight: z.number().nonnegative(),
  kvcache: z.number().nonnegative(),
  graph: z.union([z.number().nonnegative(), z.record(z.string(), z.number().nonnegative())]).optional(),
});
export type MemoryUsage = z.infer<typeof MemoryUsageSchema>;

/** Bytes per GPU of each memory tag. */
export interface EngineMemorySizes {
  weights: number;
  kv_cache: number;
  cuda_graph: number;
}

const GIB = 2 ** 30;

/** The engine's memory per GPU by tag from its server info (the first scheduler's report), or null when it
 * reports none. */
export function memorySizes(info: ServerInfo): EngineMemorySizes | null {
  const parsed = MemoryUsageSchema.safeParse(info.internal_states?.[0]?.memory_usage);
  if (!parsed.success) return null;
  const { weight, kvcache, graph } = parsed.data;
  const graphGib =
    graph === undefined
      ? 0
      : typeof graph === 'number'
        ? graph
        : Object.values(graph).reduce((s, x) => s + x, 0);
  return {
    weights: Math.round(weight * GIB),
    kv_cache: Math.round(kvcache * GIB),
    cuda_graph: Math.round(graphGib * GIB),
  };
}
