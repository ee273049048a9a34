import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { type Clock, systemClock, UisError } from '@uis/spec';
import { authorized, bearerToken } from '../gateway/auth.ts';
import { sendError } from '../proxy/index.ts';

/** Failed authentications a client may make per window before it is refused with 429. */
const MAX_FAILURES = 10;
const WINDOW_MS = 10_000;
/** Clients remembered at most; past it, expired entries go first, then the oldest. */
const MAX_CLIENTS = 10_000;

/** Failed authentications per client address in fixed windows: past `max` in one window, the client's requests
 * that carry no valid token are refused (429 + Retry-After) until the window ends. A valid token is checked before
 * this and never refused, so a guesser sharing the operator's address (a local process, a proxy) cannot lock the
 * operator out. The key is the address alone: keyed also on the presented token's prefix, a guesser would escape
 * the count by changing the prefix of each guess. */
export class AuthFailureLimiter {
  private readonly clients = new Map<string, { since: number; failures: number }>();
  constructor(
    private readonly clock: Clock = systemClock,
    private readonly max = MAX_FAILURES,
    private readonly windowMs = WINDOW_MS,
  ) {}

  /** Seconds `client` must wait, or 0 when it may try. */
  retryAfter(client: string): number {
    const c = this.clients.get(client);
    if (c === undefined || c.failures < this.max) return 0;
    const left = c.since + this.windowMs - this.clock.now();
    if (left <= 0) {
      this.clients.delete(client);
      return 0;
    }
    return Math.ceil(left / 1000);
  }

  /** Counts a failure; true when it is the one that locks the client out (for the log: once per lockout). */
  failed(client: string): boolean {
    const now = this.clock.now();
    const c = this.clients.get(client);
    if (c === undefined || now - c.since >= this.windowMs) {
      if (this.clients.size >= MAX_CLIENTS) this.evict(now);
      this.clients.set(client, { since: now, failures: 1 });
      return this.max <= 1;
    }
    c.failures++;
    return c.failures === this.max;
  }

  private evict(now: number): void {
    for (const [k, c] of this.clients) if (now - c.since >= this.windowMs) this.clients.delete(k);
    const oldest = this.clients.keys().next();
    if (this.clients.size >= MAX_CLIENTS && !oldest.done) this.clients.delete(oldest.value);
  }
}

/** Which Host header values name this server: IP literals (a DNS-rebinding page always comes with a name),
 * `localhost`, this machine's name and the configured names (with or without a port); `*` accepts any. */
export class HostAllowList {
  private readonly names: Set<string>;
  private readonly any: boolean;
  private readonly seen = new Map<string, boolean>();
  private lastHost: string | undefined;
  private lastAllowed = false;

  constructor(configured: readonly string[]) {
    this.any = configured.includes('*');
    this.names = new Set(['localhost', hostname().toLowerCase(), ...configured.map((h) => h.toLowerCase())]);
  }

  allows(host: string | undefined): boolean {
    if (this.any) return true;
    // HTTP/1.1 requires Host; without one nothing can have been rebound to us.
    if (host === undefined) return true;
    // Clients send the same Host on every request: the last answer is checked before the map.
    if (host === this.lastHost) return this.lastAllowed;
    let known = this.seen.get(host);
    if (known === undefined) {
      known = this.decide(host.toLowerCase());
      if (this.seen.size > 1000) this.seen.clear();
      this.seen.set(host, known);
    }
    this.lastHost = host;
    this.lastAllowed = known;
    return known;
  }

  private decide(host: string): boolean {
    if (this.names.has(host)) return true;
    const m = /^\[([^\]]+)\](?::\d+)?$/.exec(host) ?? /^([^:]+)(?::\d+)?$/.exec(host);
    const name = m?.[1];
    if (name === undefined) return false;
    return isIP(name) !== 0 || this.names.has(name) || name.endsWith('.localhost');
  }
}

export interface RequestGuardOptions {
  hosts: HostAllowList;
  limiter: AuthFailureLimiter;
  /** Every token this server accepts (admin, and serving when set): a request carrying one is never throttled. */
  tokens: readonly string[];
  /** Where a lockout is logged (once per lockout). */
  logger?: { warn(fields: object, message: string): void };
  /** When non-empty, the console API (`/trpc`) and `/metrics` need one of these bearer tokens too (serving or
   * admin). */
  readTokens: readonly string[];
}

/** The guard of a server with these tokens and allowed hosts: with a serving token the console API needs it (or
 * the admin token); a valid token is never throttled. */
export function guardOptions(
  server: { adminToken: string; servingToken?: string | undefined; allowedHosts?: readonly string[] },
  limiter: AuthFailureLimiter,
  logger: RequestGuardOptions['logger'],
): RequestGuardOptions {
  const readTokens = server.servingToken === undefined ? [] : [server.servingToken, server.adminToken];
  return {
    hosts: new HostAllowList(server.allowedHosts ?? []),
    limiter,
    readTokens,
    tokens: server.servingToken === undefined ? [server.adminToken] : readTokens,
    ...(logger === undefined ? {} : { logger }),
  };
}

function refusal(
  code: 'host_not_allowed' | 'auth_rate_limited' | 'unauthorized',
  message: string,
  path: string,
) {
  return new UisError({ code, path, message });
}

/** The token a tRPC subscription (SSE: EventSource sends no header) passes in its `connectionParams` query. */
function connectionToken(url: string): string | undefined {
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  const raw = new URLSearchParams(url.slice(q + 1)).get('connectionParams');
  if (raw === null) return undefined;
  try {
    const token = (JSON.parse(raw) as { token?: unknown } | null)?.token;
    return typeof token === 'string' ? token : undefined;
  } catch {
    return undefined;
  }
}

/** The readers a serving token guards besides discovery and serving: the console API (its sign-in aside) and the
 * Prometheus scrape (`/metrics` names every model, replica and engine URL). Undefined: not one of them. */
function readerOf(url: string): string | undefined {
  if (url.startsWith('/trpc') && !url.startsWith('/trpc/checkToken')) return 'the console API';
  if (url === '/metrics' || url.startsWith('/metrics?')) return 'the Prometheus scrape (/metrics)';
  return undefined;
}

/**
 * HTTP-level checks before any route: the Host must name this server (403 `host_not_allowed`); a request carrying a
 * valid token passes at once; without one, a client that failed authentication too often is refused for the rest of
 * the window (429 + Retry-After; the console's sign-in, whose token is in its body, asks the limiter itself after
 * checking it); with a serving token, the console API and `/metrics` need it (or the admin token) like discovery does. Every 401
 * any route answers counts as a failed authentication of the client's address. The guard answers a refusal itself
 * and returns false; true: the request goes on to its route.
 */
export function requestGuard(
  opts: RequestGuardOptions,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { hosts, limiter, readTokens, tokens } = opts;
  const counted = (req: IncomingMessage, res: ServerResponse, url: string) => {
    const header = req.headers.authorization;
    const presented = header === undefined ? connectionToken(url) : bearerToken(header);
    if (presented !== undefined && authorized(`Bearer ${presented}`, tokens)) return true;
    const client = req.socket.remoteAddress ?? '?';
    const wait = url.startsWith('/trpc/checkToken') ? 0 : limiter.retryAfter(client);
    if (wait > 0) {
      res.setHeader('retry-after', String(wait));
      res.shouldKeepAlive = false;
      sendError(
        res,
        refusal(
          'auth_rate_limited',
          `too many failed authentications from ${client}; retry after ${wait} s (a valid token is not refused)`,
          'headers.authorization',
        ),
        undefined,
      );
      return false;
    }
    res.once('finish', () => {
      if (res.statusCode === 401 && limiter.failed(client))
        opts.logger?.warn(
          { client, retry_after_s: limiter.retryAfter(client), path: url.split('?')[0] },
          'client locked out after too many failed authentications (requests with a valid token still pass)',
        );
    });
    return true;
  };
  return (req, res) => {
    if (!hosts.allows(req.headers.host)) {
      sendError(
        res,
        refusal(
          'host_not_allowed',
          `Host ${JSON.stringify(req.headers.host)} does not name this server; add it to gateway.allowed_hosts`,
          'headers.host',
        ),
        undefined,
      );
      return false;
    }
    // Requests that may authenticate are counted; open serving without tokens skips the bookkeeping.
    const url = req.url ?? '/';
    const auth = req.headers.authorization !== undefined || readTokens.length > 0 || url.startsWith('/admin');
    if (auth && !counted(req, res, url)) return false;
    // checkToken is the console's sign-in: it carries the token in its input, and a wrong one is a counted 401.
    const reader = readerOf(url);
    if (readTokens.length > 0 && reader !== undefined) {
      const header = req.headers.authorization;
      const token = header === undefined ? connectionToken(url) : bearerToken(header);
      if (token === undefined || !authorized(`Bearer ${token}`, readTokens)) {
        sendError(
          res,
          refusal(
            'unauthorized',
            `${reader} needs "Authorization: Bearer <token>" (serving or admin token)`,
            'headers.authorization',
          ),
          undefined,
        );
        return false;
      }
    }
    return true;
  };
}
