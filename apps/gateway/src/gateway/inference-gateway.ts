import type { IncomingMessage, ServerResponse } from 'node:http';
import type { InFlightTracker, InferenceManager } from '@uis/manager';
import {
  promptText,
  ReplicaSelector,
  type RequestKeys,
  type ResolvedModel,
  requestKeys,
  resolveModel,
} from '@uis/routing';
import {
  capabilitiesOf,
  type GroupPlacement,
  type InferenceRoleSpec,
  type Logger,
  silentLogger,
  UisError,
} from '@uis/spec';
import { Hono } from 'hono';
import type { GatewayMetrics } from '../metrics/gateway-metrics.ts';
import {
  AdmissionGate,
  type AdmissionOptions,
  asUisError,
  type BodyBudget,
  createServingHandler,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_RETRY_POLICY,
  type ErrorBodyOf,
  type FastHandler,
  type FastRoutes,
  type ForwardRoute,
  GENERATE_EDIT,
  InFlightCounter,
  type ParsedBody,
  type ProxyTarget,
  type RetryPolicy,
  rolePaths,
  type ServingProxyOptions,
  sendError,
  UpstreamPools,
} from '../proxy/index.ts';
import type { UisTracing } from '../tracing/tracing.ts';
import { holdRids, mountAbortRoute, releaseRids } from './abort-route.ts';
import { AnswerVersions } from './answer-versions.ts';
import { authorized, unauthorized } from './auth.ts';
import { GatewayRoute } from './gateway-route.ts';
import { type GenrmHost, genrmCall, refusedModel } from './genrm-call.ts';
import { openAIErrorBody } from './openai-surface.ts';
import { modelList, mountReadRoutes } from './read-routes.ts';
import { type BreakerOptions, ReplicaBreakers } from './replica-breakers.ts';
import { ReplicaTargets } from './replica-targets.ts';
import { ROUTER_PREFIX, type ServedRequest, ServedRequests } from './served-requests.ts';

export type { ServedRequest } from './served-requests.ts';

export interface InferenceGatewayOptions {
  manager: InferenceManager;
  /** The role's spec (routing rules: aliases, route keys, policies, affinity header, cache-aware knobs). */
  spec: InferenceRoleSpec;
  /** The role's placements (for Rollout's legacy `/engines` shape). */
  placements?: readonly GroupPlacement[];
  /** Shared engine connection pools; one per process is enough. */
  pools?: UpstreamPools;
  metrics?: GatewayMetrics;
  logger?: Logger;
  /** When set, discovery and serving need one of these bearer tokens (RFC open question 3). */
  servingTokens?: readonly string[];
  maxBodyBytes?: number;
  /** Deepest JSON nesting a serving body may have. */
  maxJsonDepth?: number;
  /** The process-wide budget for bytes of bodies still arriving. */
  bodyBudget?: BodyBudget;
  /** Circuit breaker settings of this role's replicas. */
  breaker?: BreakerOptions;
  /** This role's admission limit and queue (absent: unlimited). */
  admission?: AdmissionOptions;
  /** When and after what wait a request whose engine failed before answering goes to another replica (absent:
   * the proxy's defaults). */
  retry?: RetryPolicy;
  /** Longest long-poll a client may ask for. Default 300 s. */
  maxWaitSeconds?: number;
  onServed?: (r: ServedRequest) => void;
  /** Log one `access` line per serving request at info (see {@link accessLine}). */
  accessLog?: boolean;
  /** OpenTelemetry tracing (`gateway.tracing`); absent: no span is made. */
  tracing?: UisTracing | undefined;
  /** Credential headers that reach the engines anyway (`gateway.pass_headers`). */
  passHeaders?: readonly string[];
}

/** The proxy's in-flight counter, mirrored into the manager's tracker so drain waits for what the gateway forwards.
 * Admission (the tracker's acquire, which refuses draining replicas) happens when a replica is picked. */
class TrackedInFlight extends InFlightCounter {
  constructor(private readonly tracker: InFlightTracker) {
    super();
  }
  override release(targetId: string): void {
    super.release(targetId);
    if (!targetId.startsWith(ROUTER_PREFIX)) this.tracker.release(targetId);
  }
}

/** Seconds a client should wait before retrying a refusal (503s carry them in `details`). */
function retryAfterOf(err: UisError): number | undefined {
  if (err.status !== 503) return undefined;
  const d = err.details as { retry_after_s?: unknown } | undefined;
  return typeof d?.retry_after_s === 'number' ? d.retry_after_s : 5;
}

/**
 * One role's gateway: discovery (long-poll, legacy shape), health, model list on Hono, and the serving routes
 * (`/generate`, both chat completions spellings, the GenRM messages adapter) on the proxy's fast path. Routing
 * is the routing package's (`resolveModel` + `ReplicaSelector`), fed by the manager's registry; in-flight counts
 * feed both the least_outstanding policy and the manager's drain. A model that is not ready is refused with 503 +
 * `Retry-After`: the gateway never wakes a model because a request came.
 */
export class InferenceGateway {
  readonly role: string;
  readonly app = new Hono();
  readonly inFlight: InFlightCounter;
  readonly pools: UpstreamPools;
  private readonly manager: InferenceManager;
  private readonly versions: AnswerVersions;
  private readonly spec: InferenceRoleSpec;
  private readonly placements: readonly GroupPlacement[];
  private readonly selector: ReplicaSelector;
  private readonly metrics: GatewayMetrics | undefined;
  private readonly logger: Logger;
  private readonly servingTokens: readonly string[];
  private readonly maxBodyBytes: number;
  /** One circuit breaker per replica of this role. */
  readonly breakers: ReplicaBreakers;
  private readonly bodyRules: Pick<InferenceGatewayOptions, 'maxJsonDepth' | 'bodyBudget'>;
  private readonly maxWaitSeconds: number;
  /** Model of each forwarded request id, for the completion metrics. */
  private readonly tracing: UisTracing | undefined;
  private readonly requests: ServedRequests;
  /** Each replica's and router's target, made once per replica state (not per request). */
  private readonly targets = new ReplicaTargets();
  /** The last model resolved, for the snapshot and the names it was resolved from: requests come in runs of one
   * model, and a snapshot does not change until the next publish. */
  private lastResolved:
    | { snapshot: object; model: string | undefined; routeKey: string | undefined; resolved: ResolvedModel }
    | undefined;
  private readonly ownsPools: boolean;
  /** Ends the abort count of this gateway's metrics (the manager outlives a gateway in tests). */
  private readonly stopCounting: () => void = () => undefined;
  /** What the proxy counts and reports a request of this role through (the root OpenAI routes borrow it). */
  private readonly owner: Pick<
    ServingProxyOptions,
    'inFlight' | 'hooks' | 'admission' | 'retry' | 'passHeaders'
  >;
  /** This role's admission limit (absent: unlimited). */
  readonly admission: AdmissionGate | undefined;
  private readonly genrmHost: GenrmHost<ResolvedModel, RequestKeys>;
  /** Each model's engine key (`engine_api_key`), for the models whose engines check one. */
  private readonly engineKeys: ReadonlyMap<string, string>;

  constructor(opts: InferenceGatewayOptions) {
    this.manager = opts.manager;
    this.versions = new AnswerVersions(opts.manager, opts.spec.models);
    this.role = opts.manager.role;
    this.spec = opts.spec;
    this.engineKeys = new Map(
      opts.spec.models.flatMap((m) => (m.engine_api_key === undefined ? [] : [[m.name, m.engine_api_key]])),
    );
    this.placements = opts.placements ?? [];
    this.ownsPools = opts.pools === undefined;
    this.pools = opts.pools ?? new UpstreamPools();
    this.inFlight = new TrackedInFlight(opts.manager.inFlight);
    this.admission = opts.admission === undefined ? undefined : new AdmissionGate(opts.admission);
    this.owner = {
      inFlight: this.inFlight,
      ...(this.admission === undefined ? {} : { admission: this.admission }),
      ...(opts.retry === undefined ? {} : { retry: opts.retry }),
      ...(opts.passHeaders?.length
        ? { passHeaders: new Set(opts.passHeaders.map((h) => h.toLowerCase())) }
        : {}),
      hooks: {
        onDispatch: (rid, target, requestId, model) =>
          holdRids(this.manager.requests, rid, model ?? '(none)', target, requestId),
        onClientAbort: (rid, target, requestId, model) => this.abortAtEngine(rid, target, requestId, model),
        onComplete: (e) => {
          releaseRids(this.manager.requests, e.rid, e.requestId);
          this.requests.completed(e);
        },
        onAttemptFailed: (target) => this.attemptFailed(target),
      },
    };
    this.selector = new ReplicaSelector({
      inFlight: (id) => this.inFlight.get(id),
      cacheAware: opts.spec.routing.cache_aware,
    });
    this.metrics = opts.metrics;
    this.logger = opts.logger ?? silentLogger;
    this.servingTokens = opts.servingTokens ?? [];
    this.maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.breakers = new ReplicaBreakers(opts.breaker);
    this.bodyRules = {
      ...(opts.maxJsonDepth === undefined ? {} : { maxJsonDepth: opts.maxJsonDepth }),
      ...(opts.bodyBudget === undefined ? {} : { bodyBudget: opts.bodyBudget }),
    };
    this.maxWaitSeconds = opts.maxWaitSeconds ?? 300;
    this.requests = new ServedRequests({
      role: this.role,
      breakers: this.breakers,
      metrics: this.metrics,
      logger: this.logger,
      onServed: opts.onServed,
      accessLog: opts.accessLog ?? false,
    });
    this.tracing = opts.tracing;
    this.genrmHost = {
      spec: this.spec,
      pools: this.pools,
      inFlight: this.inFlight,
      keys: (body, req) => this.keys(body, req),
      resolveModel: (keys, body, res) => this.resolveModel(keys, body, res),
      pick: (model, keys, res, excluding) => this.pick(model, keys, res, excluding),
      abortAtEngine: (rid, target, requestId) => this.abortAtEngine(rid, target, requestId, undefined),
      retry: opts.retry ?? DEFAULT_RETRY_POLICY,
      attemptFailed: (target) => this.attemptFailed(target),
      trace: (req, requestId) => {
        const traced = this.tracing?.request(
          this.role,
          req.url ?? '/generate',
          requestId,
          req.headers.traceparent,
        );
        traced?.adapter('genrm_messages');
        return traced;
      },
      served: (r) => this.requests.servedByAdapter(r),
    };
    mountReadRoutes(this.app, {
      role: this.role,
      manager: this.manager,
      aliases: this.spec.routing.aliases,
      placements: this.placements,
      models: this.spec.models,
      servingTokens: this.servingTokens,
      maxWaitSeconds: this.maxWaitSeconds,
      circuitOf: (engineId) => this.breakers.state(engineId),
    });
    mountAbortRoute(this.app, rolePaths(this.role).abortRequest, this.manager);
    const metrics = this.metrics;
    if (metrics !== undefined)
      this.stopCounting = this.manager.requests.onAborted((model, reason, n) =>
        metrics.abortedRequests.inc({ role: this.role, model, reason }, n),
      );
  }

  // ---- serving (fast path) -----------------------------------------------------------------------------------

  /** Adds this role's serving routes to the process's fast route table: raw generate, and OpenAI chat and
   * completions (which answer errors in OpenAI's shape). */
  registerServing(routes: FastRoutes): void {
    const paths = rolePaths(this.role);
    const options = { pools: this.pools, maxBodyBytes: this.maxBodyBytes, ...this.bodyRules, ...this.owner };
    const openai = { ...options, errorBody: openAIErrorBody };
    const generate = createServingHandler(options, (body, req, requestId, res) =>
      // GenRM: a body with `messages` (even null: Relax's 422) is Relax's GenRM call, answered `{"response": ...}`.
      capabilitiesOf(this.role)?.messageAdapter === 'genrm_messages' && body.has('messages')
        ? {
            respond: () =>
              genrmCall(this.genrmHost, body, req, res, requestId).catch((e: unknown) =>
                sendError(res, asUisError(e), requestId),
              ),
          }
        : this.resolve(body, req, requestId, res, '/generate', GENERATE_EDIT),
    );
    const chat = createServingHandler(openai, (body, req, requestId, res) =>
      this.resolve(body, req, requestId, res, '/v1/chat/completions', undefined),
    );
    const completions = createServingHandler(openai, (body, req, requestId, res) =>
      this.resolve(body, req, requestId, res, '/v1/completions', undefined),
    );
    routes.add('POST', paths.generate, this.guard(generate));
    for (const p of paths.chat) routes.add('POST', p, this.guard(chat, openAIErrorBody));
    for (const p of paths.completions) routes.add('POST', p, this.guard(completions, openAIErrorBody));
  }

  // ---- the root OpenAI routes (OpenAIRole) ---------------------------------------------------------------------

  models() {
    return modelList(this.manager.registry.snapshot(), this.spec.routing.aliases);
  }

  serves(name: string): boolean {
    const snapshot = this.manager.registry.snapshot();
    return (
      Object.hasOwn(snapshot.models, name) ||
      Object.hasOwn(this.spec.routing.aliases, name) ||
      Object.values(snapshot.models).some((m) => m.served_model_name === name)
    );
  }

  openAIRoute(
    path: string,
    body: ParsedBody,
    req: IncomingMessage,
    requestId: string,
    res: ServerResponse,
  ): ForwardRoute | UisError {
    const route = this.resolve(body, req, requestId, res, path, undefined);
    if (!(route instanceof UisError)) route.owner = this.owner;
    return route;
  }

  /** Serving token check (when configured). */
  private guard(handler: FastHandler, errorBody?: ErrorBodyOf): FastHandler {
    return (req, res) => {
      if (this.servingTokens.length > 0 && !authorized(req.headers.authorization, this.servingTokens)) {
        req.resume();
        sendError(res, unauthorized(`${this.role} serving`), undefined, errorBody);
        return;
      }
      handler(req, res);
    };
  }

  /** Adds `Retry-After` to a refusal. The response is passed along, not looked up by request: a WeakMap keyed by
   * each request kept every request's objects alive through young-generation GCs (2x CPU per request). */
  private refuse(err: UisError, res: ServerResponse): UisError {
    const after = retryAfterOf(err);
    if (after !== undefined && !res.headersSent) res.setHeader('retry-after', String(after));
    return err;
  }

  private keys(body: ParsedBody, req: IncomingMessage): RequestKeys {
    return requestKeys(body.routingFields(), req.headers, this.spec.routing.affinity_header, false, true);
  }

  private resolveModel(keys: RequestKeys, body: ParsedBody, res: ServerResponse): ResolvedModel | UisError {
    const snapshot = this.manager.registry.snapshot();
    const last = this.lastResolved;
    let model: ResolvedModel | UisError;
    // resolveModel reads only the snapshot (never changed in place), the two names and the role's fixed rules.
    if (
      last !== undefined &&
      last.snapshot === snapshot &&
      last.model === keys.model &&
      last.routeKey === keys.routeKey
    )
      model = last.resolved;
    else {
      model = resolveModel(snapshot, keys, this.spec.routing);
      if (model instanceof UisError) return this.refuse(model, res);
      this.lastResolved = { snapshot, model: keys.model, routeKey: keys.routeKey, resolved: model };
    }
    // Only cache_aware routes on the prompt: other policies spare building a chat's text per request.
    if (model.policy === 'cache_aware') keys.prompt = promptText(body.json);
    return model;
  }

  /** The model's engine key as a raw header pair for the gateway's own engine calls (abort_request). */
  private engineAuthHeader(model: string): string[] {
    const key = this.engineKeys.get(model);
    return key === undefined ? [] : ['authorization', `Bearer ${key}`];
  }

  private resolve(
    body: ParsedBody,
    req: IncomingMessage,
    requestId: string,
    res: ServerResponse,
    path: string,
    edit: ForwardRoute['edit'],
  ): GatewayRoute | UisError {
    const keys = this.keys(body, req);
    const model = this.resolveModel(keys, body, res);
    if (model instanceof UisError) {
      // A refused known model (sleeping, draining) still counts under its name in the metrics.
      const known = refusedModel(model);
      if (known !== undefined) this.requests.refused(requestId, known);
      return model;
    }
    const traced = this.tracing?.request(this.role, req.url ?? path, requestId, req.headers.traceparent);
    if (traced !== undefined) this.requests.traced(requestId, traced);
    const route = new GatewayRoute(
      path,
      model,
      keys,
      res,
      this,
      path === '/generate' ? this.versions.raw : this.versions.openAI(model.name, body),
      edit ?? this.versions.openAIEdit(model.name, model.servedName, body),
      traced,
    );
    const key = this.engineKeys.get(model.name);
    if (key !== undefined) route.engineApiKey = key;
    return route;
  }

  /** Picks a replica by the model's policy; a replica the manager no longer admits (drain began after the
   * snapshot) is skipped. The admission also counts the request for the manager's drain. */
  pick(
    model: ResolvedModel,
    keys: RequestKeys,
    res: ServerResponse,
    excluding: ReadonlySet<string> | undefined,
  ): ProxyTarget | UisError {
    let exclude = excluding;
    for (;;) {
      // The keys are the selector's request as they are (no copy) until a replica is excluded.
      const sel = this.selector.select(
        model,
        exclude === undefined
          ? keys
          : {
              affinityKey: keys.affinityKey,
              sessionKey: keys.sessionKey,
              minWeightVersion: keys.minWeightVersion,
              prompt: keys.prompt,
              exclude,
            },
      );
      if (sel instanceof UisError) return this.refuse(sel, res);
      if (sel.engineId === null) return this.targets.router(model.name, sel.url, sel.weightVersion);
      // An open circuit skips its replica (one request probes it once its open time is up).
      if (!this.breakers.allows(sel.engineId)) {
        const next = new Set(exclude);
        next.add(sel.engineId);
        exclude = next;
        continue;
      }
      if (!this.manager.inFlight.admit(sel.engineId)) {
        const next = new Set(exclude);
        next.add(sel.engineId);
        exclude = next;
        continue;
      }
      return this.targets.engine(
        sel.engineId,
        sel.url,
        sel.weightVersion,
        this.manager.inPlaceSwitches(sel.engineId),
        this.manager.resumedInPlace(sel.engineId).count,
      );
    }
  }

  /** An attempt failed and the request went to another replica: the failed replica's circuit counts it. */
  private attemptFailed(target: ProxyTarget): void {
    if (!target.id.startsWith(ROUTER_PREFIX)) this.breakers.failure(target.id);
  }

  private abortAtEngine(
    rid: string | string[],
    target: ProxyTarget,
    requestId: string,
    routed: string | undefined,
  ): void {
    const model = routed ?? '(none)';
    this.metrics?.clientAborts.inc({ role: this.role, model });
    const rids = Array.isArray(rid) ? rid : [rid];
    this.manager.requests.counted(model, 'client_disconnect', rids.length);
    for (const one of rids) {
      this.pools
        .get(target.origin)
        .request(
          {
            path: '/abort_request',
            headers: [
              'content-type',
              'application/json',
              'x-request-id',
              requestId,
              ...this.engineAuthHeader(model),
            ],
            body: Buffer.from(JSON.stringify({ rid: one })),
          },
          AbortSignal.timeout(10_000),
        )
        .then(
          () => undefined,
          (e: unknown) =>
            this.logger.warn(
              { requestId, rid: one, engine: target.id, err: String(e) },
              'abort_request failed',
            ),
        );
    }
    this.logger.info({ requestId, rid, engine: target.id }, 'client disconnected; aborted at the engine');
  }

  /** Closes the engine connection pools this gateway created. */
  async close(): Promise<void> {
    this.stopCounting();
    if (this.ownsPools) await this.pools.close();
  }
}
