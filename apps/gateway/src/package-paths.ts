import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The gateway package's root, found through package resolution: the same from source (`src/...`), from the
 * compiled `dist/cli.mjs` and from an installed tarball. */
export const GATEWAY_ROOT = dirname(createRequire(import.meta.url).resolve('@uis/gateway/package.json'));

/** The demo layout: the repo's `examples/demo.yaml`, else the copy the build ships in `dist/`. */
export const DEMO_CONFIG = firstExisting([
  join(GATEWAY_ROOT, '..', '..', 'examples', 'demo.yaml'),
  join(GATEWAY_ROOT, 'dist', 'demo.yaml'),
]);

/** The console's Vite build: `UIS_CONSOLE_DIR` (e.g. in the container image), else `apps/console/dist` beside
 * this package, as laid out in the repo and in the image. */
export const CONSOLE_DIST = process.env.UIS_CONSOLE_DIR || join(GATEWAY_ROOT, '..', 'console', 'dist');

function firstExisting(paths: [string, ...string[]]): string {
  return paths.find((p) => existsSync(p)) ?? paths[0];
}
