import type { Span } from '@opentelemetry/api';
import type { AuditEvent } from '@uis/manager';
import type { UisTracing } from './tracing.ts';

/** The transition step each part span stands for (`transition.step` records). */
const STEP_SPAN: Record<string, string> = {
  offload: 'uis.transition.release',
  onload: 'uis.transition.onload',
  tasks: 'uis.transition.batches',
};
const ENDS = new Set(['transition.completed', 'lease.blocked', 'transition.interrupted']);
/** Records kept to place later spans under a transition: a bound, not a window (each list is cut in half). */
const KEEP = 1000;

interface Open {
  steps: AuditEvent[];
  /** `batch.run` records of this group's phase work, placed under the batches part when the transition ends. */
  batches: AuditEvent[];
}

/** A trainer's wait at a barrier (the barrier board's entry), open while `to` is undefined. */
interface BarrierSpell {
  group: string | null;
  phase: string;
  waiting: number;
  from: number;
  to?: number;
}

/** The barrier board's entries as the control plane's stream reports them. */
export interface BarrierNow {
  group: string | null;
  phase: string;
  waiting: number;
  since: number;
}

const interval = (e: AuditEvent): [number, number] => [e.at - (e.duration_ms ?? 0), e.at];

function keepLast<T>(list: T[]): T[] {
  return list.length > KEEP ? list.slice(-KEEP / 2) : list;
}

/**
 * Spans from the control plane's timed records, made when the work is over (its start and end are in the
 * records): a phase transition with its parts (release; onload with the replicas' weight syncs inside; the phase's
 * batches with one span per batch run; the trainers' barrier waits during it), batch runs outside any transition,
 * and weight updates with one child per replica. The coordinator and manager stay free of tracing code.
 */
export class AuditSpans {
  readonly #open = new Map<string, Open>();
  #syncs: AuditEvent[] = [];
  #barriers = new Map<string, BarrierSpell>();
  #waits: BarrierSpell[] = [];

  constructor(private readonly tracing: UisTracing) {}

  observe(e: AuditEvent): void {
    if (e.kind === 'transition.started') this.#open.set(e.subject, { steps: [], batches: [] });
    else if (e.kind === 'transition.step') this.#open.get(e.subject)?.steps.push(e);
    else if (e.kind === 'replica.weights_synced') this.#syncs = keepLast([...this.#syncs, e]);
    else if (e.kind === 'batch.run') this.#batchRun(e);
    else if (ENDS.has(e.kind)) this.#transition(e);
    // The manager's record (with each replica's result); the command's own record of the call has no results.
    else if (e.kind === 'admin.update_weights' && Array.isArray(e.data.results)) this.#weightUpdate(e);
  }

  /** The barrier board changed: a wait that is no longer listed ended at `now`. */
  barriers(list: readonly BarrierNow[], now: number): void {
    const next = new Map<string, BarrierSpell>();
    for (const b of list) {
      const key = `${b.group ?? ''}\u0000${b.phase}\u0000${b.since}`;
      next.set(key, { group: b.group, phase: b.phase, waiting: b.waiting, from: b.since });
    }
    for (const [key, spell] of this.#barriers) if (!next.has(key)) this.#waits.push({ ...spell, to: now });
    this.#waits = keepLast(this.#waits);
    this.#barriers = next;
  }

  #batchRun(e: AuditEvent): void {
    const group = typeof e.data.group === 'string' ? e.data.group : undefined;
    const open = group === undefined ? undefined : this.#open.get(group);
    if (open !== undefined) open.batches.push(e);
    // A batch of a role without a defer schedule runs on its own: a trace of its own.
    else this.#batchSpan(e);
  }

  #batchSpan(e: AuditEvent, parent?: Span): void {
    const [from, to] = interval(e);
    const outcome = String(e.data.outcome ?? '');
    this.tracing.span(
      'uis.batch_run',
      from,
      to,
      {
        'uis.batch.id': e.subject,
        'uis.batch.kind': String(e.data.kind ?? ''),
        'uis.role': e.actor ?? '',
        'uis.model': String(e.data.model ?? ''),
        'uis.batch.outcome': outcome,
        'uis.batch.samples': Number(e.data.samples ?? 0),
        'uis.batch.reused': Number(e.data.reused ?? 0),
      },
      parent,
      outcome === 'committed' ? undefined : String(e.data.error ?? outcome),
    );
  }

  #weightUpdate(e: AuditEvent): void {
    const [from, to] = interval(e);
    const results = e.data.results as Array<{ engine_id?: unknown; ok?: unknown; duration_ms?: unknown }>;
    const failed = results.filter((r) => r.ok !== true).length;
    const root = this.tracing.span(
      'uis.weight_update',
      from,
      to,
      {
        'uis.model': e.subject,
        'uis.role': e.actor ?? '',
        'uis.weight_source': String(e.data.source ?? ''),
        'uis.weight_version': String(e.data.target ?? ''),
        'uis.replicas': results.length,
        'uis.replicas_failed': failed,
      },
      undefined,
      results.length > 0 && failed === results.length ? 'failed on every replica' : undefined,
    );
    for (const r of results)
      this.tracing.span(
        'uis.weight_update.replica',
        from,
        from + (typeof r.duration_ms === 'number' ? r.duration_ms : to - from),
        { 'uis.replica': String(r.engine_id ?? '') },
        root,
        r.ok === true ? undefined : 'replica update failed',
      );
  }

  #transition(end: AuditEvent): void {
    const open = this.#open.get(end.subject);
    this.#open.delete(end.subject);
    const [start, stop] = interval(end);
    const completed = end.kind === 'transition.completed';
    const root = this.tracing.span(
      'uis.phase_transition',
      start,
      stop,
      {
        'uis.group': end.subject,
        'uis.from': String(end.data.from ?? ''),
        'uis.to': String(end.data.to ?? ''),
        'uis.outcome': completed ? 'ok' : end.kind,
      },
      undefined,
      completed ? undefined : String(end.data.reason ?? end.kind),
    );
    for (const step of open?.steps ?? []) this.#part(step, root, open?.batches ?? []);
    this.#barrierWaits(end.subject, start, stop, root);
  }

  /** One part of a transition, with what happened inside it: weight syncs in an onload, batch runs in the
   * phase's work. */
  #part(step: AuditEvent, root: Span, batches: readonly AuditEvent[]): void {
    const name = STEP_SPAN[String(step.data.step)];
    if (name === undefined || step.duration_ms === null) return;
    const [from, to] = interval(step);
    const phase = String(step.data.phase ?? '');
    const span = this.tracing.span(name, from, to, { 'uis.phase': phase }, root);
    if (step.data.step === 'tasks') {
      for (const b of batches) if (b.data.phase === phase) this.#batchSpan(b, span);
      return;
    }
    if (step.data.step !== 'onload') return;
    for (const s of this.#syncs) {
      const [start, end] = interval(s);
      if (start >= from && end <= to)
        this.tracing.span(
          'uis.weight_sync',
          start,
          end,
          { 'uis.replica': s.subject, 'uis.weight_version': String(s.data.weight_version ?? '') },
          span,
        );
    }
  }

  /** Trainers waiting at a barrier of this group while it moved: the part of each wait inside the transition. */
  #barrierWaits(group: string, start: number, stop: number, root: Span): void {
    for (const w of [...this.#waits, ...this.#barriers.values()]) {
      if (w.group !== null && w.group !== group) continue;
      const from = Math.max(w.from, start);
      const to = Math.min(w.to ?? stop, stop);
      if (to <= from) continue;
      this.tracing.span(
        'uis.barrier_wait',
        from,
        to,
        {
          'uis.barrier.phase': w.phase,
          'uis.barrier.waiting': w.waiting,
          'uis.barrier.waited_since': w.from,
        },
        root,
      );
    }
  }
}
