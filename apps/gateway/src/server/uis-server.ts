import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { trpcServer } from '@hono/trpc-server';
import { buildAppRouter, ChangeFeed, type ControlPlane, commandRoutes } from '@uis/control-plane';
import { asRole, type Clock, type ConsoleState, GATEWAY_FRONT_DEFAULT, type Role, UisError } from '@uis/spec';
import { Hono } from 'hono';
import pino from 'pino';
import { createAdminApi } from '../admin/admin-api.ts';
import { commandRefusal } from '../gateway/auth.ts';
import { jsonBodyLimit } from '../gateway/body-limit.ts';
import { InferenceGateway, type ServedRequest } from '../gateway/inference-gateway.ts';
import { mountOpenAIRoot, openAIErrorJson } from '../gateway/openai-surface.ts';
import { relaxElasticApi } from '../gateway/relax-elastic.ts';
import type { BreakerOptions } from '../gateway/replica-breakers.ts';
import { GatewayMetrics } from '../metrics/gateway-metrics.ts';
import { metricsSources } from '../metrics/metrics-sources.ts';
import { Observability } from '../metrics/observability.ts';
import { mountDocs } from '../openapi/docs-routes.ts';
import { CONSOLE_DIST } from '../package-paths.ts';
import {
  type AdmissionOptions,
  BodyBudget,
  createCombinedListener,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_MAX_JSON_DEPTH,
  errorJson,
  FastRoutes,
  isRolePath,
  type RetryOptions,
  RetryPolicy,
  type UpstreamPoolOptions,
  UpstreamPools,
} from '../proxy/index.ts';
import { AuditSpans } from '../tracing/audit-spans.ts';
import type { UisTracing } from '../tracing/tracing.ts';
import { ConsoleJournal } from '../trpc/console-journal.ts';
import { consoleState } from '../trpc/console-state.ts';
import { gpuTimeUpdates, timeSeriesUpdates } from '../trpc/observability-feeds.ts';
import { bodyGuard } from './body-guard.ts';
import { answerClientError } from './client-error.ts';
import { consoleHandler } from './console-static.ts';
import { FastFront } from './fast-front.ts';
import { HealthProbe, replicaTargets } from './health-probe.ts';
import { humanDestination } from './log-format.ts';
import { AuthFailureLimiter, guardOptions, type RequestGuardOptions, requestGuard } from './request-guard.ts';
import { allowedMethods, methodNotAllowed, type RouteEntry } from './unmatched.ts';

const DEFAULT_BODY_TIMEOUT_MS = 60_000;
const KEEP_ALIVE_TIMEOUT_MS = 120_000;

export interface UisServerOptions {
  plane: ControlPlane;
  adminToken: string;
  /** When set, discovery and serving need it (or the admin token). */
  servingToken?: string | undefined;
  /** When set, Relax's elastic paths take it too (and nothing else does): see `relaxElasticApi`. */
  scaleToken?: string | undefined;
  /** Relax's elastic paths take no credential (`gateway.scale_auth: open`). */
  scaleOpen?: boolean;
  logger?: pino.Logger;
  maxBodyBytes?: number;
  /** Time a client has to send a whole request, headers and body (408 and the connection closed after). Default
   * 60 s. */
  bodyTimeoutMs?: number;
  /** Bytes all request bodies still arriving may hold at once (503 + Retry-After beyond). Default 512 MiB. */
  bodyBudgetBytes?: number;
  /** Deepest JSON nesting any route accepts. Default 128. */
  maxJsonDepth?: number;
  /** Host header names accepted besides IP literals, localhost and this machine's name (`*`: any). */
  allowedHosts?: readonly string[];
  /** Counts failed authentications per client (tests pass one with their own clock). */
  authFailures?: AuthFailureLimiter;
  /** Each role's admission limit and queue (absent: unlimited). */
  admission?: AdmissionOptions;
  /** The replicas' circuit breakers (absent: on, with their defaults). */
  breaker?: BreakerOptions;
  /** Retries of serving requests whose engine failed before answering (`gateway.retry`; absent: its defaults). */
  retry?: Partial<RetryOptions>;
  /** The time source of the retries' waits (tests pass a ManualClock). */
  clock?: Clock;
  /** The console build to serve at `/`. */
  consoleDist?: string;
  /** Least time between two console pushes. */
  throttleMs?: number;
  /** Engine connection settings (timeouts). */
  upstream?: UpstreamPoolOptions;
  /** Period of the console's replica health probes; 0 turns them off. Default 5 s. */
  healthProbeMs?: number;
  /** One `access` log line per serving request (`gateway.access_log`). */
  accessLog?: boolean;
  /** Credential headers that reach the engines anyway (`gateway.pass_headers`). */
  passHeaders?: readonly string[];
  /** Per-request metrics and the console's time series (default on). Off only to measure what they cost (the
   * gateway bench's `gateway bare` column); `/metrics` still answers, without serving series. */
  servingObservability?: boolean;
  /** What parses requests (`gateway.front`, default GATEWAY_FRONT_DEFAULT): `fast` serves the serving routes on raw sockets with a
   * strict parser of its own and hands everything else to node:http; `node`: node:http parses every request. */
  front?: 'fast' | 'node';
  /** OpenTelemetry tracing (made from `gateway.tracing` by `createTracing`); the server flushes and stops it on
   * close. Absent: no span is made anywhere. */
  tracing?: UisTracing | undefined;
}

/** pino to stderr (stdout stays for what a command prints); silent under vitest unless UIS_LOG_LEVEL says. */
export function createLogger(level?: string): pino.Logger {
  const chosen = level ?? process.env.UIS_LOG_LEVEL ?? (process.env.VITEST ? 'silent' : 'info');
  // A person at a terminal reads lines; a collector (stderr redirected) gets JSON.
  const destination = process.stderr.isTTY ? humanDestination(process.stderr) : pino.destination(2);
  return pino({ level: chosen, base: { service: 'uis' } }, destination);
}

/**
 * The HTTP face of a ControlPlane on one port: a role gateway per configured role (serving routes on the proxy's
 * fast path, everything else on Hono), the admin API at `/admin`, tRPC for the console at `/trpc`, Prometheus at
 * `/metrics`, and the console build at `/`.
 */
export class UisServer {
  readonly plane: ControlPlane;
  readonly gateways = new Map<Role, InferenceGateway>();
  readonly app = new Hono();
  readonly metrics: GatewayMetrics;
  readonly observability: Observability;
  private readonly tracing: UisTracing | undefined;
  readonly journal = new ConsoleJournal();
  readonly feed = new ChangeFeed();
  readonly logger: pino.Logger;
  private readonly pools: UpstreamPools;
  /** The serving fast path's routes (served before Hono sees a request). */
  readonly routes = new FastRoutes();
  private server: Server | null = null;
  private fast: FastFront | null = null;
  private readonly front: 'fast' | 'node';
  private readonly maxBodyBytes: number;
  private readonly probe: HealthProbe | null;
  private readonly unsubscribe: Array<() => void> = [];
  private readonly bodyTimeoutMs: number;
  /** Bytes of request bodies still arriving, process-wide. */
  readonly bodyBudget: BodyBudget;
  /** Failed authentications per client address (429 + Retry-After past the limit). */
  readonly authFailures: AuthFailureLimiter;
  /** The Host allow-list, the limiter and the tokens every request is checked against first. */
  private readonly guard: RequestGuardOptions;
  /** Those checks: false when the guard answered the request itself. */
  private readonly passes: (req: IncomingMessage, res: ServerResponse) => boolean;

  constructor(opts: UisServerOptions) {
    const plane = opts.plane;
    this.plane = plane;
    this.pools = new UpstreamPools(opts.upstream);
    this.logger = opts.logger ?? createLogger();
    this.bodyTimeoutMs = opts.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS;
    this.front = opts.front ?? GATEWAY_FRONT_DEFAULT;
    this.maxBodyBytes = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.bodyBudget = new BodyBudget(opts.bodyBudgetBytes);
    this.authFailures = opts.authFailures ?? new AuthFailureLimiter();
    this.guard = guardOptions(opts, this.authFailures, this.logger);
    this.passes = requestGuard(this.guard);
    const maxJsonDepth = opts.maxJsonDepth ?? DEFAULT_MAX_JSON_DEPTH;
    // First, so it runs before every framework route: the serving fast path applies the same rules itself.
    this.app.use(
      '*',
      bodyGuard({
        budget: this.bodyBudget,
        maxBytes: opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
        maxJsonDepth,
      }),
    );
    this.metrics = this.createMetrics();
    this.observability = new Observability(this.metrics, plane.plan);
    const servingTokens = opts.servingToken === undefined ? [] : [opts.servingToken, opts.adminToken];
    // Relax's elastic API under each role, before the role gateways' own routes.
    this.app.route(
      '/',
      relaxElasticApi(
        plane,
        [...plane.managers.keys()],
        { admin: opts.adminToken, serving: opts.servingToken },
        { token: opts.scaleToken, open: opts.scaleOpen === true },
      ),
    );
    this.mountGateways(opts, servingTokens, maxJsonDepth);
    this.tracing = opts.tracing;
    this.followPlane(opts.tracing);
    this.probe = this.createProbe(opts.healthProbeMs ?? 5000);
    this.probe?.start();
    this.mountConsoleApi(opts);
    this.app.get('/metrics', async (c) =>
      c.body(await this.metrics.text(), 200, { 'content-type': this.metrics.contentType }),
    );
    this.app.get('/healthz', (c) => c.json({ status: 'ok', roles: [...this.gateways.keys()] }));
    mountDocs(this.app, () => ({ roles: [...this.gateways.keys()], admin: commandRoutes() }));
    // One base URL for a whole job: /v1/models, /v1/chat/completions, /v1/completions find the role by model.
    mountOpenAIRoot(this.app, this.routes, {
      roles: () => this.gateways.values(),
      pools: this.pools,
      servingTokens,
      bodyRules: { bodyBudget: this.bodyBudget, maxJsonDepth },
      ...(opts.maxBodyBytes === undefined ? {} : { maxBodyBytes: opts.maxBodyBytes }),
    });
    this.mountFallback(opts.consoleDist);
  }

  /** What no route takes, answered once for every route (fast serving routes and the framework's alike): a route's
   * path under another method is 405 + `Allow`, a role's path under a role that is not configured a JSON 404, any
   * other API path a JSON 404; only browser paths fall back to the console. */
  private mountFallback(consoleDist: string | undefined): void {
    const roles = new Set<string>([...this.gateways.keys(), 'admin', 'trpc', 'metrics']);
    const console = consoleHandler(consoleDist ?? CONSOLE_DIST);
    let routes: RouteEntry[] | undefined;
    this.app.all('*', (c) => {
      const path = c.req.path;
      routes ??= [...this.routes.list().map(([method, p]) => ({ method, path: p })), ...this.app.routes];
      const allow = allowedMethods(path, routes);
      if (allow.length > 0) {
        c.header('allow', allow.join(', '));
        const err = methodNotAllowed(c.req.method, path, allow);
        // The root OpenAI routes answer OpenAI's error shape.
        return path.startsWith('/v1/') ? openAIErrorJson(c, err) : errorJson(c, err);
      }
      const first = path.split('/')[1] ?? '';
      if (!this.gateways.has(first as Role) && isRolePath(first, path)) {
        const err = new UisError({
          code: 'unknown_role',
          path: 'role',
          message: `role ${JSON.stringify(first)} is not configured; roles: ${[...this.gateways.keys()].join(', ')}`,
        });
        return errorJson(c, err);
      }
      // API paths answer JSON; only browser paths fall back to the console.
      if (c.req.method !== 'GET' || roles.has(first) || asRole(first) !== undefined) {
        const err = new UisError({
          code: 'not_found',
          path,
          message: `no route ${c.req.method} ${path}`,
        });
        return errorJson(c, err);
      }
      return console(c);
    });
    this.app.onError((e, c) => {
      const err =
        e instanceof UisError ? e : new UisError({ code: 'internal_error', message: e.message, cause: e });
      if (err.status >= 500) this.logger.error({ err: e.message, path: c.req.path }, 'request failed');
      return errorJson(c, err);
    });
  }

  /** The Prometheus registry, reading live state from the gateways and the plane at scrape time. */
  private createMetrics(): GatewayMetrics {
    return new GatewayMetrics(metricsSources(this.plane, this.gateways, () => this.observability.weights));
  }

  /** A role gateway per configured role: serving routes on the fast path, the rest on Hono. */
  private mountGateways(opts: UisServerOptions, servingTokens: string[], maxJsonDepth: number): void {
    const plane = this.plane;
    const observe = opts.servingObservability !== false;
    const onServed = (r: ServedRequest) => {
      this.journal.served(r);
      if (observe) this.observability.served(r);
      this.feed.notify();
    };
    const retry = new RetryPolicy(opts.retry, opts.clock);
    for (const [role, manager] of plane.managers) {
      const spec = plane.roles[role];
      if (!spec) continue;
      const gateway = new InferenceGateway({
        manager,
        spec,
        placements: plane.placementsOf(role),
        pools: this.pools,
        ...(observe ? { metrics: this.metrics } : {}),
        logger: this.logger.child({ role }),
        servingTokens,
        onServed,
        bodyBudget: this.bodyBudget,
        maxJsonDepth,
        ...(opts.admission === undefined ? {} : { admission: opts.admission }),
        ...(opts.breaker === undefined ? {} : { breaker: opts.breaker }),
        retry,
        accessLog: opts.accessLog ?? false,
        ...(opts.passHeaders === undefined ? {} : { passHeaders: opts.passHeaders }),
        tracing: opts.tracing,
        ...(opts.maxBodyBytes === undefined ? {} : { maxBodyBytes: opts.maxBodyBytes }),
      });
      this.gateways.set(role, gateway);
      gateway.registerServing(this.routes);
      this.app.route('/', gateway.app);
    }
  }

  /** Reads the plane's records so far, then follows its changes: every change (audit events, publications, barrier
   * waiters, batch progress) wakes the console; audit events also feed its journal, the metrics, the time views and
   * the traces, barrier waits the GPU-time view and the traces. */
  private followPlane(tracing: UisTracing | undefined): void {
    const plane = this.plane;
    const auditSpans = tracing === undefined ? undefined : new AuditSpans(tracing);
    this.journal.backfill(plane.events.latest(500));
    for (const e of plane.events.latest(20_000)) this.observability.audit(e, false);
    this.unsubscribe.push(
      plane.stream.subscribe((change) => {
        if (change.type === 'audit') {
          this.journal.record(change.event);
          this.observability.audit(change.event);
          auditSpans?.observe(change.event);
        } else if (change.type === 'barriers') {
          this.observability.barriers(change.barriers, Date.now());
          auditSpans?.barriers(change.barriers, Date.now());
        }
        this.feed.notify();
      }),
    );
  }

  /** The console's replica health probes (null when `probeMs` is 0). */
  private createProbe(probeMs: number): HealthProbe | null {
    const plane = this.plane;
    return probeMs <= 0
      ? null
      : new HealthProbe({
          intervalMs: probeMs,
          targets: () => replicaTargets(plane.managers.values()),
          record: (id, sample) => {
            this.journal.probed(id, sample);
            this.feed.notify();
          },
        });
  }

  /** The console's tRPC API (one cached state per change) and the admin REST API. */
  private mountConsoleApi(opts: UisServerOptions): void {
    const plane = this.plane;
    // Every console tab subscribes: one state per change (and at most a second old) serves them all.
    let cached: { version: number; at: number; state: ConsoleState } | null = null;
    const state = (): ConsoleState => {
      const now = Date.now();
      if (cached && cached.version === this.feed.current && now - cached.at < 1000) return cached.state;
      const version = this.feed.current;
      const fresh = consoleState({
        plane,
        gateways: this.gateways,
        journal: this.journal,
        barriers: plane.barriers,
      });
      cached = { version, at: now, state: fresh };
      return fresh;
    };
    const router = buildAppRouter({
      plane,
      refuse: (header, permission) =>
        commandRefusal(header, permission, { admin: opts.adminToken, serving: opts.servingToken }),
      lockedOut: (client) => this.authFailures.retryAfter(client),
      state,
      feed: this.feed,
      observability: {
        timeSeries: (signal) => timeSeriesUpdates(this.observability.ring, signal),
        gpuTime: (signal) => gpuTimeUpdates(this.observability.gpuTime, signal),
      },
      ...(opts.throttleMs === undefined ? {} : { throttleMs: opts.throttleMs }),
    });
    this.app.route(
      '/admin',
      createAdminApi({
        plane,
        adminToken: opts.adminToken,
        servingToken: opts.servingToken,
        ...(opts.maxBodyBytes === undefined ? {} : { maxBodyBytes: opts.maxBodyBytes }),
      }),
    );
    const trpc = trpcServer({
      router,
      endpoint: '/trpc',
      createContext: (_o, c) => ({
        authorization: c.req.header('authorization') ?? null,
        client: (c.env as { incoming?: IncomingMessage } | undefined)?.incoming?.socket.remoteAddress ?? null,
      }),
    });
    this.app.use('/trpc/*', jsonBodyLimit(opts.maxBodyBytes), async (c, next) => {
      const res = await trpc(c, next);
      // tRPC refuses a content type before it labels its answer: the body is its JSON error all the same.
      if (res instanceof Response && res.status === 415) res.headers.set('content-type', 'application/json');
      return res;
    });
  }

  /** The node:http request listener of everything (serving fast path first, then Hono), for callers that run
   * their own server. */
  requestListener(): (req: IncomingMessage, res: ServerResponse) => void {
    const routes = createCombinedListener({
      serving: this.routes,
      fallback: getRequestListener(this.app.fetch),
    });
    const passes = this.passes;
    return (req, res) => {
      if (passes(req, res)) routes(req, res);
    };
  }

  private headersTimeoutMs(): number {
    return Math.min(60_000, this.bodyTimeoutMs);
  }

  /** Puts the fast serving front before `server` (whose listener is this server's `requestListener`): the serving
   * routes' requests in its subset are parsed on the raw socket, checked as the listener checks them, and go
   * straight to the route the parse found; the rest go to node:http. */
  attachFastFront(server: Server): void {
    const passes = this.passes;
    this.fast = new FastFront(server, {
      serve: (req, res, route) => {
        if (passes(req, res)) route(req, res);
      },
      route: (method, path) => this.routes.match(method, path),
      maxBodyBytes: this.maxBodyBytes,
      headersTimeoutMs: this.headersTimeoutMs(),
      requestTimeoutMs: this.bodyTimeoutMs,
      keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
    });
  }

  /** Listens (port 0: ephemeral). Resolves with the base URL. */
  async listen(port = 0, host = '127.0.0.1'): Promise<{ url: string; port: number }> {
    // The request (headers and body) must arrive within the body deadline, checked every second; the answer may
    // take as long as it takes (hour-long generations are never cut for taking long).
    const listener = this.requestListener();
    const server = createServer(
      {
        keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
        requestTimeout: this.bodyTimeoutMs,
        headersTimeout: this.headersTimeoutMs(),
        connectionsCheckingInterval: Math.min(1000, this.bodyTimeoutMs),
      },
      listener,
    );
    server.on('clientError', answerClientError);
    this.server = server;
    if (this.front === 'fast') this.attachFastFront(server);
    server.listen(port, host);
    await once(server, 'listening');
    const bound = (server.address() as AddressInfo).port;
    const shown = host.includes(':') ? `[${host}]` : host;
    return { url: `http://${shown === '0.0.0.0' ? '127.0.0.1' : shown}:${bound}`, port: bound };
  }

  /** Requests the role gateways are relaying right now. */
  inFlight(): number {
    let n = 0;
    for (const g of this.gateways.values()) n += g.inFlight.total;
    return n;
  }

  /** Stops accepting connections, lets relayed requests finish for up to `graceMs` (default 0: cut at once),
   * then closes every connection and the engine pools. The service is stopped separately. */
  async close(opts: { graceMs?: number } = {}): Promise<void> {
    this.probe?.stop();
    for (const off of this.unsubscribe.splice(0)) off();
    const server = this.server;
    this.server = null;
    if (server) {
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      this.fast?.closeIdle();
      const deadline = Date.now() + (opts.graceMs ?? 0);
      while (this.inFlight() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      server.closeAllConnections();
      this.fast?.closeAll();
      this.fast = null;
      await closed;
    }
    await this.pools.close();
    await this.tracing?.shutdown();
  }
}
