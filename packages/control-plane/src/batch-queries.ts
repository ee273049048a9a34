import type { BatchInfo, BatchStore } from '@uis/manager';

/** Reads over the deferred batch table that the store's API does not offer: the newest batches and counts per
 * kind and state, each one query, so a long-running service does not list every batch it ever ran to show or
 * count a few. (They read the store's own `batches` table, through its database handle.) */
export function newestBatches(store: BatchStore, limit: number): BatchInfo[] {
  const rows = store.db
    .prepare('SELECT id FROM batches ORDER BY created_at DESC, id DESC LIMIT ?')
    .all(limit) as Array<{ id: string }>;
  return rows.reverse().map((r) => store.get(r.id));
}

export function batchCounts(store: BatchStore): Array<{ kind: string; state: string; count: number }> {
  return store.db
    .prepare('SELECT kind, state, COUNT(*) AS count FROM batches GROUP BY kind, state ORDER BY kind, state')
    .all() as Array<{ kind: string; state: string; count: number }>;
}
