import type { AuditEvent } from '@uis/manager';
import type { EventView, HealthSample, PhaseTransitionView } from '@uis/spec';
import type { ServedRequest } from '../gateway/inference-gateway.ts';

const MAX_EVENTS = 200;
const MAX_TRANSITIONS = 50;
const MAX_SAMPLES = 30;
/** One health sample per replica per this many ms: a busy replica's history covers more than its last second. */
const SAMPLE_EVERY_MS = 1000;

function summary(e: AuditEvent): string {
  const d = e.data;
  const parts: string[] = [];
  for (const [k, v] of Object.entries(d)) {
    if (v === null || v === undefined) continue;
    const text = typeof v === 'object' ? JSON.stringify(v) : String(v);
    parts.push(`${k}=${text.length > 80 ? `${text.slice(0, 77)}...` : text}`);
    if (parts.length === 4) break;
  }
  const took = e.duration_ms === null ? '' : ` (${Math.round(e.duration_ms)} ms)`;
  return `${e.kind} ${e.subject}${took}${parts.length > 0 ? `: ${parts.join(' ')}` : ''}`;
}

/**
 * What the console shows that no component keeps: the newest audit events, the phase transitions of each
 * activation group (paired from `transition.*` / `lease.blocked` events) and a short health history per replica
 * (from the requests the gateway relayed). Fed by subscriptions; bounded.
 */
export class ConsoleJournal {
  private readonly events: EventView[] = [];
  private readonly transitions = new Map<string, PhaseTransitionView[]>();
  private readonly health = new Map<string, HealthSample[]>();

  /** Replays the newest stored events (what happened before this journal subscribed, e.g. the first phase). */
  backfill(events: readonly AuditEvent[]): void {
    for (const e of events) this.record(e);
  }

  /** Takes one audit event (subscribe this to the event log). */
  record = (e: AuditEvent): void => {
    this.events.push({
      id: e.seq,
      at: e.at,
      kind: e.kind,
      actor: e.actor ?? 'system',
      subject: e.subject,
      message: summary(e),
    });
    if (this.events.length > MAX_EVENTS) this.events.splice(0, this.events.length - MAX_EVENTS);
    const list = this.transitions.get(e.subject) ?? [];
    const open = list.findLast((t) => t.status === 'running');
    if (e.kind === 'transition.started') {
      list.push({
        id: `${e.subject}#${e.seq}`,
        from: typeof e.data.from === 'string' ? e.data.from : null,
        to: typeof e.data.to === 'string' ? e.data.to : '?',
        started_at: e.at,
        ended_at: null,
        duration_ms: null,
        status: 'running',
        error: null,
      });
    } else if (e.kind === 'transition.completed' && open) {
      open.status = 'ok';
      open.ended_at = e.at;
      open.duration_ms = e.duration_ms ?? e.at - open.started_at;
      if (typeof e.data.to === 'string') open.to = e.data.to;
    } else if (e.kind === 'lease.blocked' && open) {
      open.status = 'failed';
      open.ended_at = e.at;
      open.duration_ms = e.duration_ms ?? e.at - open.started_at;
      open.error = typeof e.data.reason === 'string' ? e.data.reason : 'transition failed';
    } else {
      return;
    }
    if (list.length > MAX_TRANSITIONS) list.splice(0, list.length - MAX_TRANSITIONS);
    this.transitions.set(e.subject, list);
  };

  /** Takes one relayed request (subscribe this to the gateways). */
  served = (r: ServedRequest): void => {
    if (r.engineId === undefined || r.outcome === 'client_abort') return;
    // Runs per served request: no array made for a known replica, and an index, not `at(-1)` (~4x its cost).
    const list = this.health.get(r.engineId) ?? [];
    const last = list[list.length - 1];
    // A 4xx is the client's fault, not the replica's; a stream cut after its head (2xx + error) is the replica's.
    const failed = r.status >= 500 || (r.outcome === 'error' && r.status < 400);
    // Within a second of the last sample only a new failure is worth a sample.
    if (last && r.at - last.at < SAMPLE_EVERY_MS && (!failed || !last.ok)) return;
    list.push({
      at: r.at,
      ok: !failed,
      latency_ms: Math.round(r.totalMs * 10) / 10,
      error: failed ? (r.error ?? `status ${r.status}`) : null,
    });
    if (list.length > MAX_SAMPLES) list.splice(0, list.length - MAX_SAMPLES);
    this.health.set(r.engineId, list);
  };

  /** Takes one health probe result. */
  probed = (engineId: string, sample: HealthSample): void => {
    const list = this.health.get(engineId) ?? [];
    list.push(sample);
    if (list.length > MAX_SAMPLES) list.splice(0, list.length - MAX_SAMPLES);
    this.health.set(engineId, list);
  };

  eventViews(): EventView[] {
    return [...this.events];
  }

  transitionsOf(group: string): PhaseTransitionView[] {
    return (this.transitions.get(group) ?? []).map((t) => ({ ...t }));
  }

  healthOf(engineId: string): HealthSample[] {
    return [...(this.health.get(engineId) ?? [])];
  }
}
