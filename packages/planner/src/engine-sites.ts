import type { ErrorCode } from '@uis/spec';
import type { BundleSite } from './inventory.ts';

/** The part of one engine that runs on one node. */
export interface EngineChunk {
  node: number;
  /** Positions (within the engine's bundle list) of this node's bundles. */
  positions: number[];
  gpus: number[];
}

export type EngineSitesResult =
  | { ok: true; chunks: EngineChunk[] }
  | { ok: false; code: ErrorCode; message: string };

const contiguous = (gpus: readonly number[]) =>
  gpus.every((g, i) => i === 0 || g === (gpus[i - 1] ?? -2) + 1);

/** Checks where one engine's bundles landed: an engine that fits a node stays on one node with ascending
 * contiguous local GPUs (SGLang takes base_gpu_id + step); a larger engine takes whole nodes, each from GPU 0,
 * each node once. `nodeGpus[n]` is node n's GPU count. */
export function checkEngineSites(
  sites: readonly BundleSite[],
  nodeGpus: readonly number[],
): EngineSitesResult {
  const chunks: EngineChunk[] = [];
  sites.forEach((site, pos) => {
    const last = chunks[chunks.length - 1];
    if (last && last.node === site.node) {
      last.positions.push(pos);
      last.gpus.push(site.gpu);
    } else {
      chunks.push({ node: site.node, positions: [pos], gpus: [site.gpu] });
    }
  });
  const first = sites[0];
  if (!first) return { ok: false, code: 'empty_engine', message: 'engine has no bundles' };
  const firstNodeGpus = nodeGpus[first.node] ?? 0;
  if (sites.length <= firstNodeGpus) {
    if (chunks.length > 1) {
      return {
        ok: false,
        code: 'engine_straddles_nodes',
        message: `a ${sites.length}-GPU engine would span ${chunks.length} nodes; an engine that fits a node must stay on one node (shift its slice or change gpus_per_engine)`,
      };
    }
    const gpus = chunks[0]?.gpus ?? [];
    if (!contiguous(gpus)) {
      return {
        ok: false,
        code: 'gpus_not_contiguous',
        message: `engine GPUs [${gpus.join(',')}] are not ascending and contiguous on one node; fix the bundle bindings`,
      };
    }
    return { ok: true, chunks };
  }
  const seen = new Set<number>();
  for (const chunk of chunks) {
    const size = nodeGpus[chunk.node] ?? 0;
    const whole = chunk.gpus.length === size && chunk.gpus.every((g, i) => g === i);
    if (!whole) {
      return {
        ok: false,
        code: 'multinode_not_whole_nodes',
        message: `a ${sites.length}-GPU engine is larger than a node, so it must take whole nodes starting at GPU 0; it got GPUs [${chunk.gpus.join(',')}] of a ${size}-GPU node`,
      };
    }
    if (seen.has(chunk.node)) {
      return {
        ok: false,
        code: 'multinode_repeated_node',
        message: 'a multi-node replica must span distinct nodes; two of its parts bind the same node',
      };
    }
    seen.add(chunk.node);
  }
  return { ok: true, chunks };
}
