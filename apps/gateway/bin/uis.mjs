#!/usr/bin/env node
// The `uis` CLI runs its compiled JavaScript (`pnpm build` makes it). Contributors run the TypeScript source
// with no build step through `uis-dev` (bin/uis-dev.mjs).
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/cli/uis.mjs', import.meta.url);
if (!existsSync(compiled)) {
  process.stderr.write(
    'uis: the compiled CLI (apps/gateway/dist/cli/uis.mjs) is missing: run `pnpm build`, or run from source with uis-dev\n',
  );
  process.exit(1);
}
await import(compiled.href);
