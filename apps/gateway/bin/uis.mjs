#!/usr/bin/env node
// The `uis` CLI runs its compiled JavaScript (`pnpm install` builds it, as does `pnpm build`). Without it (the
// build on install failed or was skipped), a checkout runs the TypeScript source through tsx and says so once.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/cli/uis.mjs', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const tsx = await import('tsx/esm/api').catch(() => null);
  if (tsx === null) {
    process.stderr.write(
      'uis: the compiled CLI (apps/gateway/dist/cli/uis.mjs) is missing: run `pnpm build`, or run from source with uis-dev\n',
    );
    process.exit(1);
  }
  process.stderr.write(
    'uis: no compiled CLI yet (`pnpm build` makes it); running from the TypeScript source\n',
  );
  tsx.register();
  await import('../src/cli/main.ts');
}
