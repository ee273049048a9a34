#!/usr/bin/env node
// In the repo the simulator runs from its TypeScript source through tsx (no build between a change and a run);
// the published package has no source, only the compiled `dist/cli.mjs`.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import('../dist/cli.mjs');
}
