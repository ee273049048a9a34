#!/usr/bin/env node
// `pnpm install` (the root's postinstall) builds the `uis` CLI and the packages it inlines, so the README's quick
// start runs `node apps/gateway/bin/uis.mjs` right after the install; turbo's cache makes a repeat cheap. A failed
// build does not fail the install: `uis` then runs from the TypeScript source and says so (bin/uis.mjs).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
console.log('uis: building the CLI (pnpm exec turbo run build --filter=@uis/gateway)');
const r = spawnSync(
  'pnpm',
  ['exec', 'turbo', 'run', 'build', '--filter=@uis/gateway', '--output-logs=errors-only'],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
if (r.status !== 0)
  console.warn(
    `uis: the CLI build failed (exit ${r.status ?? r.signal}); \`uis\` runs from source until \`pnpm build\` succeeds`,
  );
