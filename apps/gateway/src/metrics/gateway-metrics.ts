import type { ModelLoad } from '@uis/control-plane';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { TokenUsage } from '../proxy/usage.ts';
import { type CounterChild, type HistogramChild, ServedCounter, ServedHistogram } from './served-metrics.ts';
import type { ReplicaWeightRow } from './weight-versions.ts';

/** Where the collected gauges read their values at scrape time (no timer updates them). */
export interface MetricsSources {
  /** In-flight forwarded requests per role and engine id. */
  inFlight(): Array<{ role: string; engine_id: string; count: number }>;
  replicaStates(): Array<{ role: string; model: string; state: string; count: number }>;
  topologyRevisions(): Array<{ role: string; revision: number }>;
  batchCounts(): Array<{ kind: string; state: string; count: number }>;
  /** Each live replica's weight version and how many versions it trails its model's target. */
  replicaWeights?(): ReplicaWeightRow[];
  /** Replicas whose circuit breaker is not closed (state 1: half-open, 2: open). */
  circuits?(): Array<{ role: string; engine_id: string; state: number }>;
  /** Each metered model's load and replica counts, read from its engines at scrape time (KEDA, HPA). */
  modelLoad?(): Promise<ModelLoad[]>;
}

export interface MetricsOptions {
  /** Process metrics (CPU, memory, GC, event-loop lag): on by default; off where several servers share a process
   * and only one should report them. */
  processMetrics?: boolean;
}

/** One finished serving request as the metrics see it. */
export interface ObservedRequest {
  role: string;
  model: string;
  status: number;
  totalMs: number;
  /** Arrival to the first token handed to the client, for a streamed answer only. */
  ttftMs?: number | undefined;
  usage?: TokenUsage | undefined;
  /** Error codes of the attempts that were retried. */
  retries?: readonly string[] | undefined;
  /** Why the request failed at or with its engine (an engine error code), if it did. */
  upstreamError?: string | undefined;
}

interface ServedChildren {
  latency: HistogramChild;
  ttft: HistogramChild;
  prompt: CounterChild;
  generation: CounterChild;
  byStatus: Map<string | number, CounterChild>;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800];
const PHASE_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/** The gateway's Prometheus metrics on a registry of its own (tests and several servers in one process never
 * share counters). Label sets are bounded: roles, configured models, replicas, error codes, phases. */
export class GatewayMetrics {
  readonly registry = new Registry();
  // Every serving request touches these: cached children (served-metrics.ts), not prom-client's.
  readonly requests: ServedCounter;
  readonly latency: ServedHistogram;
  readonly timeToFirstToken: ServedHistogram;
  readonly promptTokens: ServedCounter;
  readonly generationTokens: ServedCounter;
  readonly upstreamRetries: Counter<'role' | 'model' | 'reason'>;
  readonly upstreamErrors: Counter<'role' | 'model' | 'kind'>;
  readonly clientAborts: Counter<'role' | 'model'>;
  readonly abortedRequests: Counter<'role' | 'model' | 'reason'>;
  readonly phaseTransitions: Histogram<'group' | 'to' | 'outcome'>;
  readonly transitionParts: Histogram<'group' | 'part'>;
  readonly #served = new Map<string, ServedChildren>();
  #lastChildren: { role: string; model: string; children: ServedChildren } | undefined;

  constructor(sources: MetricsSources, options: MetricsOptions = {}) {
    const registers = [this.registry];
    if (options.processMetrics !== false) collectDefaultMetrics({ register: this.registry });
    // Serving series are labelled by role and model first (plus one more label where said).
    const served = <L extends string = never>(name: string, help: string, ...extra: L[]) =>
      new Counter<'role' | 'model' | L>({ name, help, labelNames: ['role', 'model', ...extra], registers });
    const latency = (name: string, help: string) =>
      new ServedHistogram(name, help, this.registry, LATENCY_BUCKETS);
    const perRequest = (name: string, help: string) => new ServedCounter(name, help, this.registry);
    const phase = <L extends string>(name: string, help: string, labelNames: L[]) =>
      new Histogram<L>({ name, help, labelNames, buckets: PHASE_BUCKETS, registers });
    this.requests = perRequest(
      'uis_requests_total',
      'Serving requests by role, model and HTTP status (0: the client left before an answer; cut: the engine broke the stream after its status went out).',
    );
    this.latency = latency('uis_request_duration_seconds', 'Serving request duration, arrival to last byte.');
    this.timeToFirstToken = latency(
      'uis_time_to_first_token_seconds',
      'Streamed answers only: arrival to the first token sent to the client.',
    );
    this.promptTokens = perRequest(
      'uis_prompt_tokens_total',
      'Prompt tokens the engines reported for served answers.',
    );
    this.generationTokens = perRequest(
      'uis_generation_tokens_total',
      'Generated (completion) tokens the engines reported for served answers, streamed ones included.',
    );
    this.upstreamRetries = served(
      'uis_upstream_retries_total',
      'Requests sent to another replica after an attempt failed, by the failed attempt\u2019s error code.',
      'reason',
    );
    this.upstreamErrors = served(
      'uis_upstream_errors_total',
      'Requests that failed at or with their engine, by error code (engine_response_incomplete: a cut stream; engine_status_5xx: the engine answered a server error).',
      'kind',
    );
    this.clientAborts = served(
      'uis_client_aborts_total',
      'Requests whose client disconnected before the end; each was aborted at its engine.',
    );
    this.abortedRequests = served(
      'uis_aborted_requests_total',
      "Requests aborted at their engines, by reason: abort_request (a rid), abort_all (the requests of a model or role the gateway held), client_disconnect, max_staleness (its weights fell more than the model's max_staleness behind the newest).",
      'reason',
    );
    this.phaseTransitions = phase(
      'uis_phase_transition_duration_seconds',
      'Phase transitions of activation groups, start to the target phase entered (all parts).',
      ['group', 'to', 'outcome'],
    );
    this.transitionParts = phase(
      'uis_phase_transition_part_duration_seconds',
      'Parts of phase transitions: release (drain + offload), onload (without weight sync), weight_sync, batch_run (deferred scoring), barrier_wait (a trainer waited while another phase held the GPUs).',
      ['group', 'part'],
    );
    this.collected(sources, registers);
    this.scaling(sources, registers);
  }

  /** What a KEDA ScaledObject (Prometheus scaler) or an HPA on external metrics scales a model on: its engines'
   * queue, running requests and KV use, and its current and desired replicas; one engine read per scrape for all. */
  private scaling(sources: MetricsSources, registers: Registry[]): void {
    const load = sources.modelLoad?.bind(sources);
    if (load === undefined) return;
    let pending: Promise<ModelLoad[]> | null = null;
    // prom-client collects the gauges of a scrape concurrently: the first asks, the others share its answer.
    const rows = () => {
      pending ??= load().finally(() => setTimeout(() => (pending = null), 500).unref());
      return pending;
    };
    const gauge = (name: string, help: string, value: (r: ModelLoad) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['role', 'model'],
        registers,
        async collect() {
          const got = await rows();
          this.reset();
          for (const r of got) this.set({ role: r.role, model: r.model }, value(r));
        },
      });
    gauge(
      'uis_model_queue_requests',
      "Requests waiting in a model's engine queues: SGLang's sglang:num_queue_reqs summed over its serving replicas (engines launched with enable_metrics).",
      (r) => r.queue,
    );
    gauge(
      'uis_model_running_requests',
      "Requests a model's engines are running: SGLang's sglang:num_running_reqs summed over its serving replicas.",
      (r) => r.running,
    );
    gauge(
      'uis_model_token_usage',
      "KV cache use of a model's engines (0..1): SGLang's sglang:token_usage, the mean over its serving replicas.",
      (r) => r.token_usage,
    );
    gauge(
      'uis_model_metrics_replicas',
      "A model's serving replicas whose /metrics answered this scrape (the sums above cover these).",
      (r) => r.reporting,
    );
    gauge(
      'uis_model_replicas_current',
      'Replicas a scale of the model counts now (regular, joined, alive).',
      (r) => r.current,
    );
    gauge(
      'uis_model_replicas_desired',
      "The target of the model's running scale operation (scale_out, scale_in, the autoscaler's), else its current replicas.",
      (r) => r.desired,
    );
  }

  private collected(sources: MetricsSources, registers: Registry[]): void {
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
    const circuits = sources.circuits?.bind(sources);
    if (circuits !== undefined)
      new Gauge({
        name: 'uis_circuit_breaker_state',
        help: "A replica's circuit breaker: 0 closed (absent), 1 half-open (one probe), 2 open (skipped by routing).",
        labelNames: ['role', 'engine_id'],
        registers,
        collect() {
          this.reset();
          for (const r of circuits()) this.set({ role: r.role, engine_id: r.engine_id }, r.state);
        },
      });
    const weights = sources.replicaWeights?.bind(sources);
    if (weights === undefined) return;
    // Both gauges read one snapshot per scrape: prom-client collects each gauge separately.
    let rows: ReplicaWeightRow[] = [];
    new Gauge({
      name: 'uis_replica_weight_version_info',
      help: 'The weight version each live replica serves (value 1; the version is the label).',
      labelNames: ['role', 'model', 'engine_id', 'weight_version'],
      registers,
      collect() {
        this.reset();
        rows = weights();
        for (const r of rows)
          this.set(
            { role: r.role, model: r.model, engine_id: r.engine_id, weight_version: r.weight_version },
            1,
          );
      },
    });
    new Gauge({
      name: 'uis_replica_weight_versions_behind',
      help: 'How many weight versions each live replica trails its model\u2019s target (0: at the target).',
      labelNames: ['role', 'model', 'engine_id'],
      registers,
      collect() {
        this.reset();
        for (const r of rows) this.set({ role: r.role, model: r.model, engine_id: r.engine_id }, r.behind);
      },
    });
  }

  /** The labelled children of one role+model, resolved once per role+model (and status), not per request. */
  #children(role: string, model: string): ServedChildren {
    // Requests come in runs of one role and model: the last pair is checked before building a key.
    const last = this.#lastChildren;
    if (last !== undefined && last.role === role && last.model === model) return last.children;
    const key = `${role}\u0000${model}`;
    let c = this.#served.get(key);
    if (c === undefined) {
      const labels = { role, model };
      c = {
        latency: this.latency.labels(labels),
        ttft: this.timeToFirstToken.labels(labels),
        prompt: this.promptTokens.labels(labels),
        generation: this.generationTokens.labels(labels),
        byStatus: new Map(),
      };
      this.#served.set(key, c);
    }
    this.#lastChildren = { role, model, children: c };
    return c;
  }

  observeRequest(e: ObservedRequest): void {
    const c = this.#children(e.role, e.model);
    // A stream the engine cut after its 200 went out is not a success: `status="cut"` (its kind is in
    // uis_upstream_errors_total). Children are keyed by the status number itself (no label text per request).
    const status = e.upstreamError !== undefined && e.status > 0 && e.status < 400 ? 'cut' : e.status;
    let requests = c.byStatus.get(status);
    if (requests === undefined) {
      requests = this.requests.labels({ role: e.role, model: e.model, status: String(status) });
      c.byStatus.set(status, requests);
    }
    requests.inc();
    c.latency.observe(e.totalMs / 1000);
    if (e.ttftMs !== undefined) c.ttft.observe(e.ttftMs / 1000);
    if (e.usage !== undefined) {
      c.prompt.inc(e.usage.prompt);
      c.generation.inc(e.usage.completion);
    }
    if (e.retries !== undefined)
      for (const reason of e.retries) this.upstreamRetries.inc({ role: e.role, model: e.model, reason });
    if (e.upstreamError !== undefined)
      this.upstreamErrors.inc({ role: e.role, model: e.model, kind: e.upstreamError });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
