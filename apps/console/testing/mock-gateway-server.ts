import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import { createHTTPHandler } from '@trpc/server/adapters/standalone';
import { MockConsoleApi } from './mock-console-api.ts';
import { buildConsoleApiRouter } from './mock-router.ts';

/** Serves the console contract at `/trpc` (and, when given, the built console at `/`) from a MockConsoleApi on
 * 127.0.0.1. Stands in for `uis demo` while developing the console and in the client's HTTP tests. */

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
};

export interface MockGateway {
  url: string;
  api: MockConsoleApi;
  close(): Promise<void>;
}

export async function startMockGateway(options: {
  port?: number;
  adminToken: string;
  /** Reads need this token (or the admin token), as `uis serve` with a serving token. */
  servingToken?: string;
  distDir?: string;
  /** Advance a phase every `tickMs` (the demo loop); 0 = only on request. */
  tickMs?: number;
  /** Replicas that run elsewhere than planned (to see the mismatch highlight). */
  moved?: ConstructorParameters<typeof MockConsoleApi>[0]['moved'];
  /** Start with the lease blocked for this reason (to try resolving it). */
  blocked?: string;
}): Promise<MockGateway> {
  const api = new MockConsoleApi({
    adminToken: options.adminToken,
    servingToken: options.servingToken,
    moved: options.moved,
  });
  if (options.blocked) api.block(options.blocked);
  const trpc = createHTTPHandler({
    router: buildConsoleApiRouter(api),
    basePath: '/trpc/',
    // The subscription (SSE, no header) passes its token as tRPC connection params, as the gateway reads it.
    createContext: ({ req, info }) => {
      const token = info.connectionParams?.token;
      return { authorization: req.headers.authorization ?? (token ? `Bearer ${token}` : null) };
    },
  });
  // With a serving token, /trpc needs it or the admin token (header, or the subscription's connection params);
  // checkToken (the sign-in) carries its token in the input.
  const readRefused = (url: string, authorization: string | undefined): boolean => {
    if (options.servingToken === undefined || url.startsWith('/trpc/checkToken')) return false;
    const q = url.indexOf('?');
    const params = q < 0 ? null : new URLSearchParams(url.slice(q + 1)).get('connectionParams');
    let token = /^Bearer (\S+)$/.exec(authorization ?? '')?.[1];
    try {
      token ??= (JSON.parse(params ?? 'null') as { token?: string } | null)?.token;
    } catch {
      token = undefined;
    }
    return token !== options.adminToken && token !== options.servingToken;
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (path.startsWith('/trpc/')) {
      if (readRefused(req.url ?? '/', req.headers.authorization)) {
        // As the gateway's request guard: refused before tRPC, with the product's error body.
        res.writeHead(401, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            error: {
              code: 'unauthorized',
              path: 'headers.authorization',
              message: 'this read needs "Authorization: Bearer <token>" (serving or admin token)',
            },
          }),
        );
        return;
      }
      trpc(req, res);
      return;
    }
    const discovery = /^\/(rollout|genrm|teacher)\/engines$/.exec(path);
    if (discovery && req.method === 'GET') {
      const snapshot = api.state().roles.find((r) => r.role === discovery[1]);
      res
        .writeHead(snapshot ? 200 : 404, { 'content-type': 'application/json' })
        .end(JSON.stringify(snapshot ?? { error: { code: 'unknown_role', message: 'role not configured' } }));
      return;
    }
    if (!options.distDir) {
      res.writeHead(404).end();
      return;
    }
    const file = normalize(join(options.distDir, path === '/' ? 'index.html' : path));
    if (!file.startsWith(normalize(options.distDir))) {
      res.writeHead(400).end();
      return;
    }
    readFile(file).then(
      (body) =>
        res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body),
      () => res.writeHead(404).end('not found'),
    );
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const timer = options.tickMs ? setInterval(() => api.tick(), options.tickMs) : null;
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    api,
    close: async () => {
      if (timer) clearInterval(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
