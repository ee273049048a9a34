import { type Clock, systemClock } from '@uis/spec';
import type { Db } from './store.ts';

export interface AuditEvent {
  seq: number;
  at: number;
  /** e.g. `transition.started`, `transition.step`, `lease.blocked`, `admin.drain`, `replica.dead`. */
  kind: string;
  /** What it concerns: an activation group, a model, an engine id, a batch id. */
  subject: string;
  actor: string | null;
  operation_id: string | null;
  duration_ms: number | null;
  data: Record<string, unknown>;
}

export type AuditEventInput = Omit<AuditEvent, 'seq' | 'at' | 'actor' | 'operation_id' | 'duration_ms'> & {
  actor?: string | null;
  operation_id?: string | null;
  duration_ms?: number | null;
  at?: number;
};

/** A row as stored: `data` is JSON text. */
type EventRow = Omit<AuditEvent, 'data'> & { data: string };

/** Durable audit log of every transition and admin action, with a live stream for the console. */
export class EventLog {
  private readonly listeners = new Set<(e: AuditEvent) => void>();
  private readonly insert;
  private readonly select;
  private readonly selectLatest;
  private readonly clock: Clock;

  constructor(db: Db, clock: Clock = systemClock) {
    this.clock = clock;
    this.insert = db.prepare(
      `INSERT INTO events (at, kind, subject, actor, operation_id, duration_ms, data)
       VALUES (@at, @kind, @subject, @actor, @operation_id, @duration_ms, @data)`,
    );
    this.select = db.prepare(
      `SELECT * FROM events WHERE seq > @after
         AND (@subject IS NULL OR subject = @subject)
         AND (@kind IS NULL OR kind = @kind)
       ORDER BY seq LIMIT @limit`,
    );
    this.selectLatest = db.prepare('SELECT * FROM events ORDER BY seq DESC LIMIT ?');
  }

  append(input: AuditEventInput): AuditEvent {
    const event: Omit<AuditEvent, 'seq'> = {
      at: input.at ?? this.clock.now(),
      kind: input.kind,
      subject: input.subject,
      actor: input.actor ?? null,
      operation_id: input.operation_id ?? null,
      duration_ms: input.duration_ms ?? null,
      data: input.data,
    };
    const info = this.insert.run({ ...event, data: JSON.stringify(event.data) });
    const stored: AuditEvent = { seq: Number(info.lastInsertRowid), ...event };
    for (const l of [...this.listeners]) {
      try {
        l(stored);
      } catch {
        // One faulty subscriber must not stop the log.
      }
    }
    return stored;
  }

  list(opts: { afterSeq?: number; limit?: number; subject?: string; kind?: string } = {}): AuditEvent[] {
    const rows = this.select.all({
      after: opts.afterSeq ?? 0,
      subject: opts.subject ?? null,
      kind: opts.kind ?? null,
      limit: opts.limit ?? 1000,
    }) as EventRow[];
    return rows.map((r) => ({ ...r, data: JSON.parse(r.data) as Record<string, unknown> }));
  }

  /** The newest `limit` events, oldest first (e.g. to backfill a journal at start). */
  latest(limit: number): AuditEvent[] {
    const rows = this.selectLatest.all(limit) as EventRow[];
    return rows.reverse().map((r) => ({ ...r, data: JSON.parse(r.data) as Record<string, unknown> }));
  }

  subscribe(listener: (e: AuditEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }
}
