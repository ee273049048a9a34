import type { PoolPlan } from '@uis/spec';

/** Ray placement groups as the manager sees them. The Ray launcher implements this against Ray; tests and the
 * local launchers use `InMemoryPlacementGroups`, which records every call so ownership can be asserted. */
export interface PlacementGroups {
  create(pool: PoolPlan): Promise<void>;
  remove(pgName: string): Promise<void>;
  exists(pgName: string): Promise<boolean>;
}

export class InMemoryPlacementGroups implements PlacementGroups {
  readonly live = new Set<string>();
  readonly log: Array<{ op: 'create' | 'remove'; pg: string }> = [];
  /** Names that fail on create (tests inject a failed start). */
  readonly failOn = new Set<string>();

  constructor(existing: Iterable<string> = []) {
    for (const pg of existing) this.live.add(pg);
  }

  async create(pool: PoolPlan): Promise<void> {
    if (this.failOn.has(pool.pg_name)) throw new Error(`cannot create placement group ${pool.pg_name}`);
    this.log.push({ op: 'create', pg: pool.pg_name });
    this.live.add(pool.pg_name);
  }

  async remove(pgName: string): Promise<void> {
    this.log.push({ op: 'remove', pg: pgName });
    this.live.delete(pgName);
  }

  async exists(pgName: string): Promise<boolean> {
    return this.live.has(pgName);
  }
}
