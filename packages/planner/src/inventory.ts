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
  /** Node index of every cluster-global GPU. */
  private readonly nodeOf: Int32Array;

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
    this.nodeOf = new Int32Array(total);
    for (const [i, n] of cluster.nodes.entries())
      this.nodeOf.fill(i, this.offsets[i], (this.offsets[i] ?? 0) + n.gpus);
    const first = this.gpus[0] ?? 0;
    this.uniform = this.gpus.every((g) => g === first) ? first : null;
  }

  global(site: BundleSite): number {
    return (this.offsets[site.node] ?? 0) + site.gpu;
  }

  /** Where cluster-global GPU `g` is (the synthetic layout when no binding is given). */
  site(g: number): BundleSite {
    const node = this.nodeOf[g] ?? 0;
    return { node, gpu: g - (this.offsets[node] ?? 0) };
  }
}
