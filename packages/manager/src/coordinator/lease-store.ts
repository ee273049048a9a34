import { LeaseStatusSchema } from '@uis/spec';
import type { Db } from '../store.ts';
import type { Lease } from './types.ts';

/** The durable part of a lease: what a restarted coordinator reads back. */
export type StoredLease = Pick<Lease, 'group' | 'phase' | 'holder' | 'status' | 'reason' | 'target'> & {
  updated_at: number;
};

interface LeaseRow {
  grp: string;
  phase: string | null;
  holder: string | null;
  status: string;
  reason: string | null;
  target: string | null;
  updated_at: number;
}

/** The `leases` table: one row per activation group. The only code that reads or writes it. */
export class LeaseStore {
  readonly #select;
  readonly #upsert;

  constructor(db: Db) {
    this.#select = db.prepare('SELECT * FROM leases WHERE grp = ?');
    this.#upsert = db.prepare(
      `INSERT INTO leases (grp, phase, holder, status, reason, target, updated_at)
       VALUES (@grp, @phase, @holder, @status, @reason, @target, @at)
       ON CONFLICT(grp) DO UPDATE SET phase = @phase, holder = @holder, status = @status, reason = @reason,
         target = @target, updated_at = @at`,
    );
  }

  load(group: string): StoredLease | null {
    const row = this.#select.get(group) as LeaseRow | undefined;
    if (!row) return null;
    return {
      group,
      phase: row.phase,
      holder: row.holder ? (JSON.parse(row.holder) as string[]) : [],
      status: LeaseStatusSchema.parse(row.status),
      reason: row.reason,
      target: row.target,
      updated_at: row.updated_at,
    };
  }

  save(lease: Omit<StoredLease, 'updated_at'>, at: number): void {
    this.#upsert.run({
      grp: lease.group,
      phase: lease.phase,
      holder: JSON.stringify(lease.holder),
      status: lease.status,
      reason: lease.reason,
      target: lease.target,
      at,
    });
  }
}
