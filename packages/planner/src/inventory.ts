import type { Cluster } from '@uis/spec';

/** Where one bundle of a pool landed: node index into the inventory and the local GPU id on it. */
export interface BundleSite {
  node: number;
  gpu: number;
}

/** The cluster inventory in the order Ray sorts bundles (node by node, local GPU ascending). */
export class Inventory {
  readonly names: string[];
  readonly ips: Array<string | undefined>;
  readonly gpus: number[];
  /** Cluster-global index of each node's GPU 0. */
  readonly offsets: number[];
  readonly total: number;
  readonly byName = new Map<string, number>();
  /** GPUs per node when every node has the same count, else null. */
  readonly uniform: number | null;

  constructor(cluster: Cluster) {
    this.names = cluster.nodes.map((n) => n.name);
    this.ips = cluster.nodes.map((n) => n.ip);
    this.gpus = cluster.nodes.map((n) => n.gpus);
    this.offsets = [];
    let total = 0;
    for (const [i, n] of cluster.nodes.entries()) {
      this.offsets.push(total);
      total += n.gpus;
      if (!this.byName.has(n.name)) this.byName.set(n.name, i);
    }
    this.total = total;
    const first = this.gpus[0] ?? 0;
    this.uniform = this.gpus.every((g) => g === first) ? first : null;
  }

  global(site: BundleSite): number {
    return (this.offsets[site.node] ?? 0) + site.gpu;
  }

  /** Sites of `count` consecutive global GPUs from `start` (the synthetic layout when no binding is given). */
  sequential(start: number, count: number): BundleSite[] {
    const out: BundleSite[] = [];
    let node = 0;
    for (let g = start; g < start + count && g < this.total; g++) {
      while ((this.offsets[node] ?? 0) + (this.gpus[node] ?? 0) <= g) node++;
      out.push({ node, gpu: g - (this.offsets[node] ?? 0) });
    }
    return out;
  }
}
