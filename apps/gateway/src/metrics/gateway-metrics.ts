import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Where the collected gauges read their values at scrape time (no timer updates them). */
export interface MetricsSources {
  /** In-flight forwarded requests per role and engine id. */
  inFlight(): Array<{ role: string; engine_id: string; count: number }>;
  replicaStates(): Array<{ role: string; model: string; state: string; count: number }>;
  topologyRevisions(): Array<{ role: string; revision: number }>;
  batchCounts(): Array<{ kind: string; state: string; count: number }>;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800];
const PHASE_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** The gateway's Prometheus metrics on a registry of its own (tests and several servers in one process never
 * share counters). */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'role' | 'model' | 'status'>;
  readonly latency: Histogram<'role' | 'model'>;
  readonly timeToFirstByte: Histogram<'role' | 'model'>;
  readonly phaseTransitions: Histogram<'group' | 'to' | 'outcome'>;
  readonly clientAborts: Counter<'role'>;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'uis_requests_total',
      help: 'Serving requests by role, model and HTTP status (0: the client left before an answer).',
      labelNames: ['role', 'model', 'status'],
      registers,
    });
    this.latency = new Histogram({
      name: 'uis_request_duration_seconds',
      help: 'Serving request duration, arrival to last byte.',
      labelNames: ['role', 'model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.timeToFirstByte = new Histogram({
      name: 'uis_time_to_first_token_seconds',
      help: 'Arrival to the first response byte sent to the client; for a stream, the first token.',
      labelNames: ['role', 'model'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.phaseTransitions = new Histogram({
      name: 'uis_phase_transition_duration_seconds',
      help: 'Phase transitions of activation groups (offload + proof + onload + phase tasks).',
      labelNames: ['group', 'to', 'outcome'],
      buckets: PHASE_BUCKETS,
      registers,
    });
    this.clientAborts = new Counter({
      name: 'uis_client_aborts_total',
      help: 'Requests whose client disconnected before the end; each was aborted at its engine.',
      labelNames: ['role'],
      registers,
    });
    new Gauge({
      name: 'uis_inflight_requests',
      help: 'Requests the gateway has in flight per replica.',
      labelNames: ['role', 'engine_id'],
      registers,
      collect() {
        this.reset();
        for (const r of sources.inFlight()) this.set({ role: r.role, engine_id: r.engine_id }, r.count);
      },
    });
    new Gauge({
      name: 'uis_replicas',
      help: 'Replicas per role, model and state.',
      labelNames: ['role', 'model', 'state'],
      registers,
      collect() {
        this.reset();
        for (const r of sources.replicaStates())
          this.set({ role: r.role, model: r.model, state: r.state }, r.count);
      },
    });
    new Gauge({
      name: 'uis_topology_revision',
      help: 'Discovery topology revision per role.',
      labelNames: ['role'],
      registers,
      collect() {
        this.reset();
        for (const r of sources.topologyRevisions()) this.set({ role: r.role }, r.revision);
      },
    });
    new Gauge({
      name: 'uis_deferred_batches',
      help: 'Deferred scoring batches per kind and state.',
      labelNames: ['kind', 'state'],
      registers,
      collect() {
        this.reset();
        for (const r of sources.batchCounts()) this.set({ kind: r.kind, state: r.state }, r.count);
      },
    });
  }

  observeRequest(e: {
    role: string;
    model: string;
    status: number;
    totalMs: number;
    ttfbMs: number | undefined;
  }): void {
    const labels = { role: e.role, model: e.model };
    this.requests.inc({ ...labels, status: String(e.status) });
    this.latency.observe(labels, e.totalMs / 1000);
    if (e.ttfbMs !== undefined) this.timeToFirstByte.observe(labels, e.ttfbMs / 1000);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
