import { type Clock, type DiscoverySnapshot, sseData, systemClock, UisError } from '@uis/spec';
import type { Attempt, CallOptions, DirectClientOptions } from './direct-options.ts';
import { DirectRequests, errorBody, type FetchLike } from './direct-requests.ts';
import { ReplicaSelector } from './replica-selector.ts';
import { type HeaderBag, type RequestKeys, requestKeys } from './request-keys.ts';
import { checkSnapshot } from './resolve-model.ts';
import { type Route, route } from './route.ts';
import { DEFAULT_AFFINITY_HEADER } from './routing-rules.ts';
import { StalenessRule } from './staleness.ts';

export type { FetchLike } from './direct-requests.ts';

const OPENAI_PATHS = new Set(['/v1/chat/completions', '/v1/completions']);
const FETCH_SNAPSHOT_SLACK_MS = 5_000;
const REFRESH_BEFORE_RETRY_MS = 2_000;

function isAbort(e: unknown): boolean {
  return e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError');
}

/**
 * Routes requests itself with the gateway's rules and calls engines directly. It keeps a discovery snapshot
 * fresh by long-polling the gateway (falling back to plain polling when the gateway ignores `wait_revision`),
 * resolves and selects with the same `route()` the gateway runs, and on a 503 or a connection error refreshes
 * once and retries once on another replica. A 400 is never retried; a stream is never replayed. On each newer
 * snapshot it holds its requests in flight to their model's `max_staleness` as the gateway holds its own: one that
 * started on a version more than the bound behind the newest is aborted at its engine (its caller gets the partial
 * output, `finish_reason` abort, and resumes it).
 */
export class DirectClient {
  readonly selector: ReplicaSelector;
  /** Every engine attempt of the most recently started request (diagnostics; concurrent requests replace it). */
  lastAttempts: Attempt[] = [];
  /** How the watch loop runs: long-poll until the gateway shows it ignores `wait_revision`. */
  watchMode: 'long_poll' | 'poll' = 'long_poll';
  /** The last discovery error the watch loop saw (it keeps routing on the last good snapshot meanwhile). */
  lastWatchError: unknown;

  private current: DiscoverySnapshot | undefined;
  private readonly fetchFn: FetchLike;
  private readonly clock: Clock;
  private readonly suspects = new Map<string, number>();
  private readonly listeners = new Set<(snapshot: DiscoverySnapshot) => void>();
  private readonly stop = new AbortController();
  private watching: Promise<void> | undefined;
  private readonly options: DirectClientOptions;
  private readonly requests: DirectRequests;
  private readonly staleness = new StalenessRule();

  constructor(options: DirectClientOptions) {
    if ((options.discoveryUrl === undefined) === (options.engineUrls === undefined)) {
      throw new UisError({
        code: 'invalid_direct_client_options',
        path: 'discoveryUrl',
        message: 'give exactly one of discoveryUrl (http://gw/<role>/engines) or engineUrls',
      });
    }
    this.options = options;
    this.fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.clock = options.clock ?? systemClock;
    this.requests = new DirectRequests(this.fetchFn, this.clock);
    this.selector = new ReplicaSelector(options.selector);
    if (options.engineUrls !== undefined) {
      const model = options.model ?? 'default';
      const snap = checkSnapshot({
        role: 'rollout',
        topology_revision: 0,
        registry_epoch: 'static',
        phase: null,
        models: {
          [model]: {
            state: 'ready',
            router_url: null,
            engines: options.engineUrls.map((url, i) => ({
              engine_id: `${model}/${i}`,
              base_url: url.replace(/\/+$/, ''),
              state: 'ready',
              direct_eligible: true,
            })),
          },
        },
        routing: {
          default_model: model,
          route_keys: {},
          aliases: {},
          policy: 'round_robin',
          model_policies: {},
        },
      });
      if (snap instanceof UisError) {
        throw new UisError({
          code: 'invalid_engine_urls',
          path: 'engineUrls',
          message: snap.message,
        });
      }
      this.current = snap;
    }
  }

  /** The snapshot routing uses now (undefined before the first discovery answer). */
  get snapshot(): DiscoverySnapshot | undefined {
    return this.current;
  }

  /** Fetches discovery once and starts watching it (long-poll). Resolves with the first snapshot. */
  async start(): Promise<DiscoverySnapshot> {
    if (this.options.discoveryUrl === undefined) return this.current!;
    const first = await this.refresh();
    this.watching ??= this.watch();
    return first;
  }

  /** Stops watching and re-sending aborts; in-flight requests finish. */
  async close(): Promise<void> {
    this.stop.abort();
    this.requests.close();
    await this.watching;
  }

  /** Calls `listener` whenever a newer snapshot is adopted; returns the unsubscribe function. */
  onSnapshot(listener: (snapshot: DiscoverySnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** One plain discovery fetch; adopts the answer when it is newer. */
  async refresh(signal?: AbortSignal): Promise<DiscoverySnapshot> {
    if (this.options.discoveryUrl === undefined) return this.current!;
    const snap = await this.fetchSnapshot(this.options.discoveryUrl, signal ?? AbortSignal.timeout(10_000));
    this.adopt(snap);
    return this.current!;
  }

  /** Aborts request `rid` (SGLang's `abort_request`) at the replica this client sent it to; its caller gets the
   * partial output (`finish_reason` abort). False when no request with that rid is in flight here. A request
   * without a rid was given one: the first chunk of a stream (`meta_info.id`) names it. The abort is sent again,
   * backing off, until the answer ends: an engine drops an abort that arrives before it registered the rid. */
  abort(rid: string): Promise<boolean> {
    return this.requests.abort(rid);
  }

  /** Aborts still being sent again (their requests' answers have not ended). */
  get abortsResending(): number {
    return this.requests.resending;
  }

  /** POST /generate (SGLang native). */
  generate<T = unknown>(body: Record<string, unknown>, options?: CallOptions): Promise<T> {
    return this.json<T>('/generate', body, options);
  }

  /** POST /v1/chat/completions (OpenAI). `model` is rewritten to the served model name. */
  chatCompletions<T = unknown>(body: Record<string, unknown>, options?: CallOptions): Promise<T> {
    return this.json<T>('/v1/chat/completions', body, options);
  }

  /** Streaming /generate: yields the data of each SSE event until `[DONE]`. */
  generateStream(body: Record<string, unknown>, options?: CallOptions): AsyncGenerator<string> {
    return this.stream('/generate', body, options);
  }

  /** Streaming chat completions: yields the data of each SSE event (JSON text) until `[DONE]`. */
  chatCompletionsStream(body: Record<string, unknown>, options?: CallOptions): AsyncGenerator<string> {
    return this.stream('/v1/chat/completions', body, options);
  }

  async json<T>(path: string, body: Record<string, unknown>, options: CallOptions = {}): Promise<T> {
    const { res, release } = await this.send(path, { ...body, stream: false }, options);
    try {
      const text = await res.text();
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new UisError({
          code: 'engine_bad_response',
          path: res.url,
          message: `engine answered ${res.status} with a body that is not JSON: ${text.slice(0, 200)}`,
        });
      }
    } finally {
      release();
    }
  }

  /** Streams SSE data chunks. Retries happen only before the engine answers; once the response has started, an
   * error ends the stream (the request is never replayed, so no token is produced twice). */
  async *stream(
    path: string,
    body: Record<string, unknown>,
    options: CallOptions = {},
  ): AsyncGenerator<string> {
    const { res, release } = await this.send(path, { ...body, stream: true }, options);
    try {
      if (res.body === null) return;
      for await (const data of sseData(res.body)) {
        if (data === '[DONE]') return;
        yield data;
      }
    } finally {
      release();
    }
  }

  private adopt(next: DiscoverySnapshot): boolean {
    const cur = this.current;
    const newer =
      cur === undefined ||
      (next.registry_epoch ?? '') !== (cur.registry_epoch ?? '') ||
      next.topology_revision > cur.topology_revision;
    if (!newer) return false;
    this.current = next;
    for (const bound of this.staleness.bounds(next)) this.requests.abortStale(bound);
    for (const listener of this.listeners) listener(next);
    return true;
  }

  private async fetchSnapshot(url: string, signal: AbortSignal): Promise<DiscoverySnapshot> {
    const res = await this.fetchFn(url, { headers: { accept: 'application/json' }, signal });
    if (!res.ok) {
      throw new UisError({
        code: 'discovery_unavailable',
        path: 'discovery',
        message: `discovery ${url} answered ${res.status}`,
        details: await errorBody(res),
      });
    }
    const snap = checkSnapshot(await res.json());
    if (snap instanceof UisError) throw snap;
    return snap;
  }

  /** Long-polls discovery: `?wait_revision=N&timeout_s=T` returns as soon as the revision exceeds N. A gateway
   * that ignores the parameters answers at once with the same revision: then poll at an interval instead. */
  private async watch(): Promise<void> {
    const stop = this.stop.signal;
    const timeoutS = this.options.longPollTimeoutS ?? 30;
    const interval = this.options.pollIntervalMs ?? 2_000;
    let failures = 0;
    while (!stop.aborted) {
      const cur = this.current!;
      const url = new URL(this.options.discoveryUrl!);
      url.searchParams.set('wait_revision', String(cur.topology_revision));
      url.searchParams.set('timeout_s', String(timeoutS));
      // Lets a gateway answer at once when its epoch differs (a restarted manager restarts revisions at 0).
      if (cur.registry_epoch !== undefined) url.searchParams.set('registry_epoch', cur.registry_epoch);
      const started = this.clock.now();
      try {
        const signal = AbortSignal.any([
          stop,
          AbortSignal.timeout(timeoutS * 1000 + FETCH_SNAPSHOT_SLACK_MS),
        ]);
        const snap = await this.fetchSnapshot(url.toString(), signal);
        failures = 0;
        const changed = this.adopt(snap);
        const quick = this.clock.now() - started < Math.min((timeoutS * 1000) / 2, 1_000);
        if (!changed && quick) {
          this.watchMode = 'poll';
          await this.pause(interval, stop);
        } else if (changed && this.watchMode === 'poll' && !quick) {
          this.watchMode = 'long_poll';
        }
      } catch (e) {
        if (stop.aborted) break;
        failures++;
        // Discovery down or malformed: keep routing on the last good snapshot, retry with capped backoff.
        await this.pause(Math.min(interval * 2 ** Math.min(failures - 1, 5), 30_000), stop);
        if (!isAbort(e)) this.lastWatchError = e;
      }
    }
  }

  /** Waits `ms` on the clock; stopping the client ends the wait early. */
  private pause(ms: number, stop: AbortSignal): Promise<void> {
    return this.clock.sleep(ms, stop).catch(() => undefined);
  }

  private keysFor(body: Record<string, unknown>, options: CallOptions): RequestKeys {
    // The published routing block carries no affinity header name: the default unless the caller overrides.
    const affinityHeader = this.options.routing?.affinity_header ?? DEFAULT_AFFINITY_HEADER;
    const keys = requestKeys(body, options.headers as HeaderBag | undefined, affinityHeader);
    if (options.model !== undefined) keys.model = options.model;
    if (options.routeKey !== undefined) keys.routeKey = options.routeKey;
    if (options.affinityKey !== undefined && options.affinityKey !== '')
      keys.affinityKey = options.affinityKey;
    return keys;
  }

  private excluded(extra: ReadonlySet<string>): Set<string> | undefined {
    const now = this.clock.now();
    const out = new Set(extra);
    for (const [id, until] of this.suspects) {
      if (until <= now) this.suspects.delete(id);
      else out.add(id);
    }
    return out.size > 0 ? out : undefined;
  }

  private routeOnce(keys: RequestKeys, failed: ReadonlySet<string>): Route | UisError {
    if (this.current === undefined) {
      return new UisError({
        code: 'discovery_not_loaded',
        path: 'discovery',
        message: 'no discovery snapshot yet: call start() first',
      });
    }
    const exclude = this.excluded(failed);
    const routed = route(this.current, keys, this.selector, { routing: this.options.routing, exclude });
    // Locally suspected replicas are a hint, not a rule: if they are all that is left, try them.
    if (
      routed instanceof UisError &&
      routed.code === 'no_eligible_replica' &&
      exclude !== undefined &&
      failed.size === 0
    ) {
      return route(this.current, keys, this.selector, { routing: this.options.routing });
    }
    return routed;
  }

  private engineBody(path: string, body: Record<string, unknown>, routed: Route): string {
    const { route_key: _routeKey, ...rest } = body;
    if (OPENAI_PATHS.has(path)) return JSON.stringify({ ...rest, model: routed.model.servedName });
    const { model: _model, ...generate } = rest;
    return JSON.stringify(generate);
  }

  /** Sends to a selected replica; on a connection error or a 503, refreshes discovery once and retries once on
   * another replica. Returns an OK response and the function that ends its in-flight count. */
  private async send(
    path: string,
    request: Record<string, unknown>,
    options: CallOptions,
  ): Promise<{ res: Response; release: () => void }> {
    const { body, rid } = this.requests.withRid(request);
    // Keys from the caller's body: a generated rid is no affinity key.
    const keys = this.keysFor(request, options);
    const attempts: Attempt[] = options.attempts ?? [];
    this.lastAttempts = attempts;
    const failed = new Set<string>();
    let lastError: UisError | undefined;
    let aborted = false;
    for (let attempt = 0; attempt < 2; attempt++) {
      // An aborted request is not sent again elsewhere.
      if (aborted) throw lastError!;
      if (attempt === 1) {
        // Bounded: a slow discovery must not hold the retry for long; the last snapshot is still usable.
        const timeout = AbortSignal.timeout(REFRESH_BEFORE_RETRY_MS);
        const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
        await this.refresh(signal).catch(() => undefined);
      }
      const routed = this.routeOnce(keys, failed);
      if (routed instanceof UisError) {
        if (routed.status !== 503) throw routed;
        // After an engine failure, its error says more than "no other replica".
        lastError ??= routed;
        break;
      }
      const { selection } = routed;
      const engineId = selection.engineId;
      if (engineId !== null) this.selector.acquire(engineId);
      const letGo = this.requests.hold(rid, {
        base: selection.url,
        model: selection.model,
        weightVersion: selection.weightVersion,
      });
      let released = false;
      const release = () => {
        if (!released && engineId !== null) this.selector.release(engineId);
        released = true;
        aborted ||= letGo();
      };
      let res: Response;
      try {
        res = await this.fetchFn(`${selection.url}${path}`, {
          method: 'POST',
          headers: { ...options.headers, 'content-type': 'application/json' },
          body: this.engineBody(path, body, routed),
          signal: options.signal,
        });
      } catch (e) {
        release();
        if (options.signal?.aborted) throw e;
        attempts.push({ url: selection.url, engineId, outcome: 'connection_error' });
        if (engineId !== null) {
          failed.add(engineId);
          this.suspects.set(engineId, this.clock.now() + (this.options.failureCooldownMs ?? 10_000));
        }
        lastError = new UisError({
          code: 'engine_unreachable',
          path: selection.url,
          message: `engine ${engineId ?? selection.url} at ${selection.url} is unreachable: ${e instanceof Error ? e.message : String(e)}`,
          cause: e,
        });
        continue;
      }
      if (res.ok) {
        attempts.push({ url: selection.url, engineId, outcome: 'ok', status: res.status });
        return { res, release };
      }
      release();
      const details = await errorBody(res);
      if (res.status === 503) {
        attempts.push({ url: selection.url, engineId, outcome: 'unavailable', status: 503 });
        if (engineId !== null) failed.add(engineId);
        lastError = new UisError({
          code: 'engine_unavailable',
          path: selection.url,
          message: `engine ${engineId ?? selection.url} answered 503`,
          details,
        });
        continue;
      }
      attempts.push({
        url: selection.url,
        engineId,
        outcome: res.status < 500 ? 'rejected' : 'error',
        status: res.status,
      });
      throw new UisError({
        code: res.status < 500 ? 'engine_rejected' : 'engine_error',
        relayedStatus: res.status,
        path: `body`,
        message: `engine ${engineId ?? selection.url} answered ${res.status}${typeof details === 'string' ? `: ${details}` : ''}`,
        details,
      });
    }
    if (this.options.gatewayFallback) return this.viaGateway(path, body, options, attempts, lastError, rid);
    throw lastError!;
  }

  private gatewayBase(): string | undefined {
    if (this.options.gatewayUrl !== undefined) return this.options.gatewayUrl.replace(/\/+$/, '');
    const d = this.options.discoveryUrl;
    if (d === undefined) return undefined;
    const url = new URL(d);
    url.search = '';
    return url.toString().replace(/\/engines\/?$/, '');
  }

  private async viaGateway(
    path: string,
    body: Record<string, unknown>,
    options: CallOptions,
    attempts: Attempt[],
    cause: UisError | undefined,
    rid: string | undefined,
  ): Promise<{ res: Response; release: () => void }> {
    const base = this.gatewayBase();
    if (base === undefined) throw cause!;
    const url = `${base}${path}`;
    // The gateway's own abort_request finds the replica it chose.
    const letGo = this.requests.hold(rid, { base });
    const res = await this.fetchFn(url, {
      method: 'POST',
      headers: { ...options.headers, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: options.signal,
    }).catch((e: unknown) => {
      letGo();
      throw e;
    });
    attempts.push({ url, engineId: null, outcome: res.ok ? 'ok' : 'error', status: res.status });
    if (res.ok) return { res, release: letGo };
    letGo();
    const details = await errorBody(res);
    throw new UisError({
      code: 'gateway_fallback_failed',
      relayedStatus: res.status,
      path: url,
      message: `direct routing failed (${cause?.message ?? 'no replica'}) and the gateway answered ${res.status}`,
      details,
    });
  }
}
