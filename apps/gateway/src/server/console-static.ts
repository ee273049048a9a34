import { existsSync, readFileSync, statSync } from 'node:fs';
import { extname, join, normalize, sep } from 'node:path';
import { UisError } from '@uis/spec';
import type { Context } from 'hono';
import { CONSOLE_DIST } from '../package-paths.ts';
import { errorJson } from '../proxy/index.ts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
};

const MISSING = `<!doctype html><html><head><meta charset="utf-8"><title>UIS console not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto; line-height: 1.5">
<h1>The console is not built yet</h1>
<p>The gateway serves the operator console from <code>apps/console/dist</code>, which does not exist.</p>
<p>Build it with <code>pnpm --filter @uis/console build</code> (or run <code>pnpm start</code>, which builds it and
starts the demo), then reload this page.</p>
<p>The APIs work without it: <a href="/rollout/engines">/rollout/engines</a>, <a href="/metrics">/metrics</a>,
<code>/trpc</code>, <code>/admin</code>.</p></body></html>`;

/** Serves the console build: `/` (the console routes by hash, so it has no other pages) and the files of the build;
 * any other path is a JSON 404. Without a build, `/` is a page saying how to build it. Paths are resolved inside
 * `root` only. */
export function consoleHandler(root: string = CONSOLE_DIST) {
  return (c: Context) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(c.req.path);
    } catch {
      const err = new UisError({
        code: 'invalid_path',
        path: 'path',
        message: `the path ${c.req.path} has a malformed percent-encoding`,
      });
      return errorJson(c, err);
    }
    const index = join(root, 'index.html');
    const rel = normalize(decoded).replace(/^([/\\])+/, '');
    if (rel === '' || rel === '.') {
      if (!existsSync(index)) return c.html(MISSING, 200);
      return c.body(readFileSync(index), 200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-cache',
      });
    }
    const file = join(root, rel);
    if ((file === root || file.startsWith(root + sep)) && existsSync(file) && statSync(file).isFile()) {
      const type = TYPES[extname(file)] ?? 'application/octet-stream';
      // Vite fingerprints assets: cache them; index.html must always be fresh.
      const cache = rel.startsWith('assets') ? 'public, max-age=31536000, immutable' : 'no-cache';
      return c.body(readFileSync(file), 200, { 'content-type': type, 'cache-control': cache });
    }
    const err = new UisError({
      code: 'not_found',
      path: c.req.path,
      message: `no route GET ${c.req.path}; the console is at / and the API is described at /openapi.json`,
    });
    return errorJson(c, err);
  };
}
