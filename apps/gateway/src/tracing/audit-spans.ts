import type { AuditEvent } from '@uis/manager';
import type { UisTracing } from './tracing.ts';

const STEP_SPAN: Record<string, string> = {
  offload: 'uis.transition.release',
  onload: 'uis.transition.onload',
  tasks: 'uis.batch_run',
};
const ENDS = new Set(['transition.completed', 'lease.blocked', 'transition.interrupted']);

interface Open {
  steps: AuditEvent[];
}

/**
 * Spans from the audit log's timed records, made when the work is over (its start and end are in the records):
 * a phase transition with its parts (release, onload with the replicas' weight syncs inside, batch runs), and weight
 * updates. The coordinator and manager stay free of tracing code.
 */
export class AuditSpans {
  readonly #open = new Map<string, Open>();
  #syncs: AuditEvent[] = [];

  constructor(private readonly tracing: UisTracing) {}

  observe(e: AuditEvent): void {
    if (e.kind === 'transition.started') this.#open.set(e.subject, { steps: [] });
    else if (e.kind === 'transition.step') this.#open.get(e.subject)?.steps.push(e);
    else if (e.kind === 'replica.weights_synced') {
      this.#syncs.push(e);
      if (this.#syncs.length > 1000) this.#syncs = this.#syncs.slice(-500);
    } else if (ENDS.has(e.kind)) this.#transition(e);
    else if (e.kind === 'admin.update_weights')
      this.tracing.span('uis.weight_update', e.at - (e.duration_ms ?? 0), e.at, {
        'uis.model': e.subject,
        'uis.role': e.actor ?? '',
        'uis.weight_source': String(e.data.source ?? ''),
        'uis.weight_version': String(e.data.target ?? ''),
      });
  }

  #transition(end: AuditEvent): void {
    const open = this.#open.get(end.subject);
    this.#open.delete(end.subject);
    const duration = end.duration_ms ?? 0;
    const root = this.tracing.span(
      'uis.phase_transition',
      end.at - duration,
      end.at,
      {
        'uis.group': end.subject,
        'uis.from': String(end.data.from ?? ''),
        'uis.to': String(end.data.to ?? ''),
        'uis.outcome': end.kind === 'transition.completed' ? 'ok' : end.kind,
      },
      undefined,
      end.kind === 'transition.completed' ? undefined : String(end.data.reason ?? end.kind),
    );
    for (const step of open?.steps ?? []) {
      const name = STEP_SPAN[String(step.data.step)];
      if (name === undefined || step.duration_ms === null) continue;
      const from = step.at - step.duration_ms;
      const span = this.tracing.span(
        name,
        from,
        step.at,
        { 'uis.phase': String(step.data.phase ?? '') },
        root,
      );
      if (step.data.step !== 'onload') continue;
      for (const s of this.#syncs) {
        const start = s.at - (s.duration_ms ?? 0);
        if (start >= from && s.at <= step.at)
          this.tracing.span(
            'uis.weight_sync',
            start,
            s.at,
            { 'uis.replica': s.subject, 'uis.weight_version': String(s.data.weight_version ?? '') },
            span,
          );
      }
    }
  }
}
