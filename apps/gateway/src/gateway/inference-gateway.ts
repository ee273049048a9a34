import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { InferenceManager, InflightTracker } from '@uis/manager';
import {
  candidatesOf,
  promptText,
  ReplicaSelector,
  type RequestKeys,
  type ResolvedModel,
  requestKeys,
  resolveModel,
} from '@uis/routing';
import { type GroupPlacement, type InferenceRoleSpec, retryGuidance, UisError, zodError } from '@uis/spec';
import { type Context, Hono } from 'hono';
import { z } from 'zod';
import type { GatewayMetrics } from '../metrics/gateway-metrics.ts';
import {
  asUisError,
  type CompletionEvent,
  createServingHandler,
  DEFAULT_MAX_BODY_BYTES,
  type FastHandler,
  type FastRoutes,
  type ForwardRoute,
  InFlightCounter,
  type ParsedBody,
  ProxyErrorCode,
  type ProxyTarget,
  sendError,
  servingPaths,
  type TokenUsage,
  UpstreamPools,
} from '../proxy/index.ts';
import { accessLine } from './access-log.ts';
import { authorized, unauthorized } from './auth.ts';
import { type GenrmHost, genrmCall, refusedModel } from './genrm-call.ts';
import { legacyEngines } from './legacy-engines.ts';

/** What the gateway logs through (pino loggers satisfy it). */
export interface GatewayLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  /** pino's: lets a per-request debug line skip building its fields when debug is off. */
  isLevelEnabled?(level: string): boolean;
}

const silent: GatewayLogger = { debug() {}, info() {}, warn() {} };

/** One served request as the console's health history and the metrics see it. */
export interface ServedRequest {
  role: string;
  model: string;
  engineId: string | undefined;
  status: number;
  outcome: CompletionEvent['outcome'];
  totalMs: number;
  ttfbMs: number | undefined;
  /** Streamed answers only: arrival to the first token sent to the client. */
  ttftMs?: number | undefined;
  usage?: TokenUsage | undefined;
  /** Error codes of the attempts that were retried on another replica. */
  retries?: readonly string[] | undefined;
  /** The engine error code when the request failed at or with its engine. */
  upstreamError?: string | undefined;
  error: string | undefined;
  at: number;
}

export interface InferenceGatewayOptions {
  manager: InferenceManager;
  /** The role's spec (routing rules: aliases, route keys, policies, affinity header, cache-aware knobs). */
  spec: InferenceRoleSpec;
  /** The role's placements (for Rollout's legacy `/engines` shape). */
  placements?: readonly GroupPlacement[];
  /** Shared engine connection pools; one per process is enough. */
  pools?: UpstreamPools;
  metrics?: GatewayMetrics;
  logger?: GatewayLogger;
  /** When set, discovery and serving need one of these bearer tokens (RFC open question 3). */
  servingTokens?: readonly string[];
  maxBodyBytes?: number;
  /** Longest long-poll a client may ask for. Default 300 s. */
  maxWaitSeconds?: number;
  onServed?: (r: ServedRequest) => void;
  /** Log one `access` line per serving request at info (see {@link accessLine}). */
  accessLog?: boolean;
  now?: () => number;
}

const EngineQuerySchema = z.object({
  // Decimal digits only: `Number()` would read '' as 0 and '0x10' as 16, answering a revision nobody asked for.
  wait_revision: z
    .string()
    .regex(/^\d{1,15}$/, 'must be a topology revision: a non-negative decimal integer')
    .transform(Number)
    .optional(),
  timeout_s: z
    .string()
    .trim()
    .min(1, 'must be a number of seconds')
    .transform(Number)
    .pipe(z.number().nonnegative())
    .optional(),
  schema: z.enum(['1', '2']).optional(),
  model_name: z.string().min(1).optional(),
  /** The epoch the client's `wait_revision` belongs to: revisions restart with a new registry, so a client that
   * saw another epoch gets the current snapshot at once instead of waiting for a revision that may never come. */
  registry_epoch: z.string().min(1).optional(),
});
const HealthQuerySchema = z.object({ schema: z.enum(['1', '2']).optional() });

/** Methods other than the ones a route answers get 405 + `Allow` instead of a 404 that hides the route. */
const OTHER_METHODS = {
  read: ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
  serving: ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
} as const;

export function methodNotAllowed(method: string, path: string, allow: string): UisError {
  return new UisError({
    code: 'method_not_allowed',
    status: 405,
    path: 'method',
    message: `${method} ${path} is not supported; use ${allow}`,
  });
}

const ROUTER_PREFIX = 'router:';

/** The proxy's in-flight counter, mirrored into the manager's tracker so drain waits for what the gateway forwards.
 * Admission (the tracker's acquire, which refuses draining replicas) happens when a replica is picked. */
class TrackedInFlight extends InFlightCounter {
  constructor(private readonly tracker: InflightTracker) {
    super();
  }
  override release(targetId: string): void {
    super.release(targetId);
    if (!targetId.startsWith(ROUTER_PREFIX)) this.tracker.release(targetId);
  }
}

/** The engine error a finished request met, if an engine was involved: the proxy's error code, or
 * `engine_status_5xx` when the engine itself answered a server error. Refusals before any engine are not upstream
 * errors. */
function upstreamErrorOf(e: CompletionEvent): string | undefined {
  if (e.target === undefined) return undefined;
  if (e.error !== undefined) return e.error.code;
  return e.outcome === 'ok' && e.status >= 500 ? 'engine_status_5xx' : undefined;
}

const queryError = (error: z.ZodError): UisError => zodError(error, 'query', 'invalid_query');

/** Seconds a client should wait before retrying a refusal (503s carry them in `details`). */
function retryAfterOf(err: UisError): number | undefined {
  if (err.status !== 503) return undefined;
  const d = err.details as { retryAfterSeconds?: unknown } | undefined;
  return typeof d?.retryAfterSeconds === 'number' ? d.retryAfterSeconds : 5;
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
  private readonly spec: InferenceRoleSpec;
  private readonly placements: readonly GroupPlacement[];
  private readonly selector: ReplicaSelector;
  private readonly metrics: GatewayMetrics | undefined;
  private readonly logger: GatewayLogger;
  private readonly servingTokens: readonly string[];
  private readonly maxBodyBytes: number;
  private readonly maxWaitSeconds: number;
  private readonly onServed: ((r: ServedRequest) => void) | undefined;
  private readonly accessLog: boolean;
  private readonly now: () => number;
  /** Model of each forwarded request id, for the completion metrics. */
  private readonly modelOf = new Map<string, string>();
  private readonly origins = new Map<string, string>();
  private readonly ownsPools: boolean;
  private readonly genrmHost: GenrmHost<ResolvedModel, RequestKeys>;

  constructor(opts: InferenceGatewayOptions) {
    this.manager = opts.manager;
    this.role = opts.manager.role;
    this.spec = opts.spec;
    this.placements = opts.placements ?? [];
    this.ownsPools = opts.pools === undefined;
    this.pools = opts.pools ?? new UpstreamPools();
    this.inFlight = new TrackedInFlight(opts.manager.inflight);
    this.selector = new ReplicaSelector({
      inFlight: (id) => this.inFlight.get(id),
      cacheAware: opts.spec.routing.cache_aware,
    });
    this.metrics = opts.metrics;
    this.logger = opts.logger ?? silent;
    this.servingTokens = opts.servingTokens ?? [];
    this.maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.maxWaitSeconds = opts.maxWaitSeconds ?? 300;
    this.onServed = opts.onServed;
    this.accessLog = opts.accessLog ?? false;
    this.now = opts.now ?? (() => performance.now());
    this.genrmHost = {
      spec: this.spec,
      pools: this.pools,
      inFlight: this.inFlight,
      now: this.now,
      keys: (body, req) => this.keys(body, req),
      resolveModel: (keys, body, res) => this.resolveModel(keys, body, res),
      pick: (model, keys, res, excluding) => this.pick(model, keys, res, excluding),
      abortAtEngine: (rid, target, requestId) => this.abortAtEngine(rid, target, requestId),
      served: (r) => this.served(r),
    };
    this.mountReadRoutes();
  }

  // ---- discovery, health, models (Hono) ----------------------------------------------------------------------

  private mountReadRoutes(): void {
    const base = `/${this.role}`;
    const app = this.app;
    if (this.servingTokens.length > 0) {
      const tokens = this.servingTokens;
      app.use(`${base}/*`, async (c, next) => {
        if (!authorized(c.req.header('authorization'), tokens)) {
          return c.json(unauthorized(`${this.role} discovery`).toJSON(), 401);
        }
        await next();
      });
    }
    app.get(`${base}/engines`, async (c) => {
      const q = EngineQuerySchema.safeParse(c.req.query());
      if (!q.success) return c.json(queryError(q.error).toJSON(), 400);
      const { wait_revision, timeout_s, schema, model_name, registry_epoch } = q.data;
      const registry = this.manager.registry;
      let snapshot = registry.snapshot();
      const sameEpoch = registry_epoch === undefined || registry_epoch === snapshot.registry_epoch;
      if (wait_revision !== undefined && sameEpoch && snapshot.topology_revision <= wait_revision) {
        const seconds = Math.min(timeout_s ?? 30, this.maxWaitSeconds);
        // Woken by the registry's publication (subscribe), not by polling; a client that leaves ends the wait.
        snapshot = await registry.waitForRevision(wait_revision + 1, seconds * 1000, c.req.raw.signal);
      }
      if (schema === '1') {
        const pids = (id: string) => this.pidsOf(id);
        return c.json(legacyEngines(snapshot, this.placements, pids, model_name));
      }
      if (model_name !== undefined) {
        const entry = snapshot.models[model_name];
        return c.json({ ...snapshot, models: entry === undefined ? {} : { [model_name]: entry } });
      }
      return c.json(snapshot);
    });
    app.get(`${base}/health`, (c) => {
      const q = HealthQuerySchema.safeParse(c.req.query());
      if (!q.success) return c.json(queryError(q.error).toJSON(), 400);
      const snapshot = this.manager.registry.snapshot();
      const models: Record<string, unknown> = {};
      let anyServing = false;
      for (const [name, m] of Object.entries(snapshot.models)) {
        const eligible = candidatesOf(m).length;
        const canServe = m.router_url !== null ? m.state === 'ready' : m.state === 'ready' && eligible > 0;
        anyServing ||= canServe;
        const guidance = retryGuidance(m.state, m.held === true);
        models[name] = {
          state: m.state,
          can_serve: canServe,
          replicas: m.engines.length,
          eligible_replicas: eligible,
          weight_version: m.weight_version ?? null,
          ...(canServe ? {} : { reason: guidance.reason, retry_after_s: guidance.retryAfterSeconds }),
        };
      }
      if (q.data.schema === '1') {
        // Relax's GenRM service answered this shape; healthy means it can score now.
        return c.json({ status: anyServing ? 'healthy' : 'unhealthy', service: this.role });
      }
      return c.json({
        status: 'ok',
        role: this.role,
        phase: snapshot.phase,
        topology_revision: snapshot.topology_revision,
        registry_epoch: snapshot.registry_epoch ?? null,
        can_serve: anyServing,
        models,
      });
    });
    app.get(`${base}/v1/models`, (c) => {
      const snapshot = this.manager.registry.snapshot();
      const created = Math.floor(Date.now() / 1000);
      const data: Array<Record<string, unknown>> = Object.entries(snapshot.models).map(([name, m]) => ({
        id: name,
        object: 'model',
        created,
        owned_by: 'uis',
        root: m.served_model_name ?? name,
        state: m.state,
      }));
      for (const [alias, target] of Object.entries(this.spec.routing.aliases)) {
        if (Object.hasOwn(snapshot.models, alias)) continue;
        data.push({ id: alias, object: 'model', created, owned_by: 'uis', root: target, alias_of: target });
      }
      return c.json({ object: 'list', data });
    });
    const read = [`${base}/engines`, `${base}/health`, `${base}/v1/models`];
    const { generate, chat } = servingPaths(this.role);
    const refuse = (allow: string) => (c: Context) => {
      c.header('allow', allow);
      return c.json(methodNotAllowed(c.req.method, c.req.path, allow).toJSON(), 405);
    };
    app.on([...OTHER_METHODS.read], read, refuse('GET, HEAD'));
    // POST never gets here: the serving routes answer it on the fast path.
    app.on([...OTHER_METHODS.serving], [generate, ...chat], refuse('POST'));
  }

  private pidsOf(engineId: string): number[] {
    for (const m of Object.values(this.manager.snapshot().models)) {
      const r = m.replicas.find((x) => x.engine_id === engineId);
      if (r) return r.pids;
    }
    return [];
  }

  // ---- serving (fast path) -----------------------------------------------------------------------------------

  /** Adds this role's serving routes to the process's fast route table. */
  registerServing(routes: FastRoutes): void {
    const paths = servingPaths(this.role);
    const options = {
      pools: this.pools,
      inFlight: this.inFlight,
      maxBodyBytes: this.maxBodyBytes,
      hooks: {
        onClientAbort: (rid: string | string[], target: ProxyTarget, requestId: string) =>
          this.abortAtEngine(rid, target, requestId),
        onComplete: (e: CompletionEvent) => this.completed(e),
      },
    };
    const generate = createServingHandler(options, (body, req, requestId, res) =>
      // GenRM: a body with `messages` is Relax's GenRM call, answered `{"response": ...}` by the adapter.
      this.role === 'genrm' && body.json.messages !== undefined
        ? {
            respond: () =>
              genrmCall(this.genrmHost, body, req, res, requestId).catch((e: unknown) =>
                sendError(res, asUisError(e), requestId),
              ),
          }
        : this.resolve(body, req, requestId, res, '/generate', { remove: ['model', 'route_key'] }),
    );
    const chat = createServingHandler(options, (body, req, requestId, res) =>
      this.resolve(body, req, requestId, res, '/v1/chat/completions', undefined),
    );
    routes.add('POST', paths.generate, this.guard(generate));
    for (const p of paths.chat) routes.add('POST', p, this.guard(chat));
  }

  /** Serving token check (when configured). */
  private guard(handler: FastHandler): FastHandler {
    return (req, res) => {
      if (this.servingTokens.length > 0 && !authorized(req.headers.authorization, this.servingTokens)) {
        req.resume();
        sendError(res, unauthorized(`${this.role} serving`), undefined);
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
    return requestKeys(body.json, req.headers, this.spec.routing.affinity_header, false);
  }

  private resolveModel(keys: RequestKeys, body: ParsedBody, res: ServerResponse): ResolvedModel | UisError {
    const model = resolveModel(this.manager.registry.snapshot(), keys, this.spec.routing);
    if (model instanceof UisError) return this.refuse(model, res);
    // Only cache_aware routes on the prompt: other policies spare building a chat's text per request.
    if (model.policy === 'cache_aware') keys.prompt = promptText(body.json);
    return model;
  }

  private resolve(
    body: ParsedBody,
    req: IncomingMessage,
    requestId: string,
    res: ServerResponse,
    path: string,
    edit: ForwardRoute['edit'],
  ): ForwardRoute | UisError {
    const keys = this.keys(body, req);
    const model = this.resolveModel(keys, body, res);
    if (model instanceof UisError) {
      // A refused known model (sleeping, draining) still counts under its name in the metrics.
      const known = refusedModel(model);
      if (known !== undefined) this.modelOf.set(requestId, known);
      return model;
    }
    this.modelOf.set(requestId, model.name);
    return {
      path,
      pick: (excluding) => this.pick(model, keys, res, excluding),
      // Chat: `model` becomes the engine's served name; `route_key` is the gateway's, never the engine's.
      edit: edit ?? { set: { model: model.servedName }, remove: ['route_key'] },
    };
  }

  /** Picks a replica by the model's policy; a replica the manager no longer admits (drain began after the
   * snapshot) is skipped. The admission also counts the request for the manager's drain. */
  private pick(
    model: ResolvedModel,
    keys: RequestKeys,
    res: ServerResponse,
    excluding: ReadonlySet<string> | undefined,
  ): ProxyTarget | UisError {
    let exclude = excluding;
    for (;;) {
      const sel = this.selector.select(model, {
        affinityKey: keys.affinityKey,
        minWeightVersion: keys.minWeightVersion,
        prompt: keys.prompt,
        exclude,
      });
      if (sel instanceof UisError) return this.refuse(sel, res);
      if (sel.engineId === null)
        return { id: `${ROUTER_PREFIX}${model.name}`, origin: this.originOf(sel.url) };
      try {
        this.manager.inflight.acquire(sel.engineId);
      } catch {
        const next = new Set(exclude);
        next.add(sel.engineId);
        exclude = next;
        continue;
      }
      return { id: sel.engineId, origin: this.originOf(sel.url) };
    }
  }

  /** A replica's origin; URLs are few and stable, so each is parsed once, not per request. */
  private originOf(url: string): string {
    let origin = this.origins.get(url);
    if (origin === undefined) {
      origin = new URL(url).origin;
      if (this.origins.size >= 1024) this.origins.clear();
      this.origins.set(url, origin);
    }
    return origin;
  }

  private abortAtEngine(rid: string | string[], target: ProxyTarget, requestId: string): void {
    this.metrics?.clientAborts.inc({ role: this.role, model: this.modelOf.get(requestId) ?? '(none)' });
    const rids = Array.isArray(rid) ? rid : [rid];
    for (const one of rids) {
      this.pools
        .get(target.origin)
        .request(
          {
            path: '/abort_request',
            headers: ['content-type', 'application/json', 'x-request-id', requestId],
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

  private completed(e: CompletionEvent): void {
    const model = this.modelOf.get(e.requestId) ?? '(none)';
    this.modelOf.delete(e.requestId);
    // The first byte handed to the client: for a stream, the first token (headers leave with it).
    const ttfbMs = e.firstByteOutMs ?? e.ttfbMs;
    this.served({
      model,
      engineId: e.target?.id,
      status: e.status,
      outcome: e.outcome,
      totalMs: e.totalMs,
      ttfbMs,
      ttftMs: e.streamed ? ttfbMs : undefined,
      usage: e.usage,
      retries: e.retries.length > 0 ? e.retries : undefined,
      upstreamError: upstreamErrorOf(e),
      error: e.error?.message,
      requestId: e.requestId,
    });
  }

  private served(r: Omit<ServedRequest, 'role' | 'at'> & { requestId: string }): void {
    this.metrics?.observeRequest({ role: this.role, ...r });
    const { requestId, ...rest } = r;
    const entry: ServedRequest = { role: this.role, at: Date.now(), ...rest };
    this.onServed?.(entry);
    if (this.accessLog) this.logger.info(accessLine(entry, requestId), 'access');
    // Refusals by design (4xx, 503 for a model that is not ready) are the service working: debug, not warn.
    if (r.status >= 500 && r.status !== 503)
      this.logger.warn({ requestId, role: this.role, ...rest }, 'request failed');
    else if (r.outcome === 'error' && r.status < 400)
      this.logger.warn({ requestId, role: this.role, ...rest }, 'stream broke');
    else if (this.logger.isLevelEnabled?.('debug') ?? true)
      this.logger.debug({ requestId, role: this.role, ...rest }, 'request served');
  }

  /** Closes the engine connection pools this gateway created. */
  async close(): Promise<void> {
    if (this.ownsPools) await this.pools.close();
  }
}
