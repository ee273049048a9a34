/** An approximate radix tree of recently routed prompts, shared by all replicas ("tenants") of one model, as in
 * sgl-model-gateway's cache_aware policy: every node remembers which tenants routed text through it and when
 * (a logical tick, so the tree is deterministic and needs no clock). Memory is bounded per tenant: when a tenant
 * holds more than `maxTenantChars` characters, its least recently used leaves are evicted down to a low-water mark
 * (so eviction, a walk of the tree, is amortised over many inserts instead of running on every request). */

interface TreeNode {
  /** Edge label from the parent to this node. */
  edge: string;
  parent: TreeNode | null;
  /** First UTF-16 code unit of the child's edge -> child. */
  children: Map<number, TreeNode>;
  /** Tenant -> logical tick of its last access through this node. */
  tenants: Map<string, number>;
}

export interface TenantStats {
  /** Characters of edges the tenant holds in the tree. */
  chars: number;
}

export interface PrefixMatch {
  /** Characters of the text matched by the tree (any tenant). */
  matchedChars: number;
  /** The most recently used tenant at the deepest matched node that passes the filter, or null. */
  tenant: string | null;
  /** Characters matched along the path down to that tenant's node. */
  tenantMatchedChars: number;
}

export interface RadixTreeOptions {
  maxTenantChars: number;
  /** Fraction of `maxTenantChars` eviction brings a tenant down to. */
  lowWater?: number;
}

function newNode(edge: string, parent: TreeNode | null): TreeNode {
  return { edge, parent, children: new Map(), tenants: new Map() };
}

/** A copy of `s` that does not keep its parent string alive. V8 represents long slices as views into the parent:
 * an edge sliced from a request's prompt would otherwise retain the whole prompt (and the memory bound would
 * count a fraction of what is held). Flattening a fresh concatenation copies the characters once. */
function detach(s: string): string {
  if (s.length < 16) return s;
  const copy = ` ${s}`;
  copy.charCodeAt(1);
  return copy.slice(1);
}

/** Characters `text` from `offset` shares with `edge`. Comparing substrings with `===` lets V8 compare flat
 * strings with memcmp, which is an order of magnitude faster than a charCodeAt loop over a 2 KB prompt; a partial
 * match is found by a short char loop, then binary search over substring equality. */
export function commonPrefixLength(text: string, offset: number, edge: string): number {
  const max = Math.min(text.length - offset, edge.length);
  if (max === edge.length && text.slice(offset, offset + max) === edge) return max;
  const linear = Math.min(max, 16);
  let i = 0;
  while (i < linear && text.charCodeAt(offset + i) === edge.charCodeAt(i)) i++;
  if (i < linear || i === max) return i;
  let lo = i;
  let hi = max;
  if (text.slice(offset, offset + hi) === edge.slice(0, hi)) return hi;
  hi--;
  // Invariant: the first `lo` characters match and the first `hi + 1` do not.
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (text.slice(offset + lo, offset + mid) === edge.slice(lo, mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

export class ApproxRadixTree {
  private readonly root: TreeNode = newNode('', null);
  private readonly charsByTenant = new Map<string, TenantStats>();
  private tick = 0;
  private nodeCount = 1;
  private readonly maxTenantChars: number;
  private readonly lowWaterChars: number;

  constructor(options: RadixTreeOptions) {
    this.maxTenantChars = options.maxTenantChars;
    this.lowWaterChars = Math.floor(options.maxTenantChars * (options.lowWater ?? 0.8));
  }

  /** Characters the tree holds for `tenant` (0 when unknown). */
  tenantChars(tenant: string): number {
    return this.charsByTenant.get(tenant)?.chars ?? 0;
  }

  /** A live view of a tenant's size: the same object for as long as the tenant is known, so a hot loop can read
   * `.chars` of many tenants without a map lookup each. */
  statsFor(tenant: string): TenantStats {
    let stats = this.charsByTenant.get(tenant);
    if (stats === undefined) {
      stats = { chars: 0 };
      this.charsByTenant.set(tenant, stats);
    }
    return stats;
  }

  get nodes(): number {
    return this.nodeCount;
  }

  tenants(): string[] {
    return [...this.charsByTenant.keys()];
  }

  /** Records that `text` was routed to `tenant`. */
  insert(text: string, tenant: string): void {
    const tick = ++this.tick;
    let node = this.root;
    let offset = 0;
    node.tenants.set(tenant, tick);
    let added = 0;
    while (offset < text.length) {
      const child = node.children.get(text.charCodeAt(offset));
      if (child === undefined) {
        const leaf = newNode(detach(text.slice(offset)), node);
        node.children.set(text.charCodeAt(offset), leaf);
        this.nodeCount++;
        leaf.tenants.set(tenant, tick);
        added += leaf.edge.length;
        break;
      }
      const common = commonPrefixLength(text, offset, child.edge);
      let next = child;
      if (common < child.edge.length) next = this.split(child, common);
      if (!next.tenants.has(tenant)) added += next.edge.length;
      next.tenants.set(tenant, tick);
      node = next;
      offset += common;
    }
    const stats = this.statsFor(tenant);
    stats.chars += added;
    if (stats.chars > this.maxTenantChars) this.evictTenant(tenant, this.lowWaterChars);
  }

  /** Splits `node`'s edge after `at` characters; returns the new upper node (which keeps the tenants). */
  private split(node: TreeNode, at: number): TreeNode {
    const parent = node.parent!;
    const upper = newNode(detach(node.edge.slice(0, at)), parent);
    upper.tenants = new Map(node.tenants);
    parent.children.set(upper.edge.charCodeAt(0), upper);
    node.edge = detach(node.edge.slice(at));
    node.parent = upper;
    upper.children.set(node.edge.charCodeAt(0), node);
    this.nodeCount++;
    return upper;
  }

  /** Longest prefix of `text` in the tree; the tenant is the most recent one at the deepest node that has a tenant
   * accepted by `accept` (walking back up when the deepest node's tenants are all rejected). A partially matched
   * edge counts, as in sgl-model-gateway. */
  prefixMatch(text: string, accept?: (tenant: string) => boolean): PrefixMatch {
    let node = this.root;
    let offset = 0;
    const path: TreeNode[] = [];
    const depths: number[] = [];
    while (offset < text.length) {
      const child = node.children.get(text.charCodeAt(offset));
      if (child === undefined) break;
      const common = commonPrefixLength(text, offset, child.edge);
      offset += common;
      path.push(child);
      depths.push(offset);
      if (common < child.edge.length) break;
      node = child;
    }
    for (let i = path.length - 1; i >= 0; i--) {
      let best: string | null = null;
      let bestTick = -1;
      for (const [tenant, tick] of path[i]!.tenants) {
        if (tick > bestTick && (accept === undefined || accept(tenant))) {
          best = tenant;
          bestTick = tick;
        }
      }
      if (best !== null) return { matchedChars: offset, tenant: best, tenantMatchedChars: depths[i]! };
    }
    return { matchedChars: offset, tenant: null, tenantMatchedChars: 0 };
  }

  /** Forgets tenants not in `live` (replicas that left the topology). */
  retainTenants(live: ReadonlySet<string>): void {
    for (const tenant of [...this.charsByTenant.keys()]) {
      if (!live.has(tenant)) this.removeTenant(tenant);
    }
  }

  removeTenant(tenant: string): void {
    if (!this.charsByTenant.has(tenant)) return;
    this.evictTenant(tenant, 0);
    this.root.tenants.delete(tenant);
    this.charsByTenant.delete(tenant);
  }

  /** Evicts `tenant`'s least recently used leaves until it holds at most `target` characters. */
  private evictTenant(tenant: string, target: number): void {
    const leaves: TreeNode[] = [];
    const stack: TreeNode[] = [this.root];
    while (stack.length > 0) {
      const node = stack.pop()!;
      let hasTenantChild = false;
      for (const child of node.children.values()) {
        if (child.tenants.has(tenant)) {
          hasTenantChild = true;
          stack.push(child);
        }
      }
      if (!hasTenantChild && node !== this.root && node.tenants.has(tenant)) leaves.push(node);
    }
    const heap = new TickHeap(tenant, leaves);
    const stats = this.statsFor(tenant);
    let total = stats.chars;
    while (total > target) {
      const leaf = heap.pop();
      if (leaf === undefined) break;
      leaf.tenants.delete(tenant);
      total -= leaf.edge.length;
      const parent = leaf.parent!;
      if (leaf.tenants.size === 0) {
        parent.children.delete(leaf.edge.charCodeAt(0));
        this.nodeCount--;
      }
      if (parent !== this.root && parent.tenants.has(tenant)) {
        let parentIsLeaf = true;
        for (const child of parent.children.values()) {
          if (child.tenants.has(tenant)) {
            parentIsLeaf = false;
            break;
          }
        }
        if (parentIsLeaf) heap.push(parent);
      }
    }
    stats.chars = Math.max(0, total);
  }
}

/** Min-heap of nodes by one tenant's last-access tick. */
class TickHeap {
  private readonly items: TreeNode[];
  constructor(
    private readonly tenant: string,
    items: TreeNode[],
  ) {
    this.items = [];
    for (const item of items) this.push(item);
  }
  private key(node: TreeNode): number {
    return node.tenants.get(this.tenant) ?? 0;
  }
  push(node: TreeNode): void {
    const items = this.items;
    items.push(node);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.key(items[parent]!) <= this.key(items[i]!)) break;
      [items[parent], items[i]] = [items[i]!, items[parent]!];
      i = parent;
    }
  }
  pop(): TreeNode | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && this.key(items[l]!) < this.key(items[m]!)) m = l;
        if (r < items.length && this.key(items[r]!) < this.key(items[m]!)) m = r;
        if (m === i) break;
        [items[m], items[i]] = [items[i]!, items[m]!];
        i = m;
      }
    }
    return top;
  }
}
