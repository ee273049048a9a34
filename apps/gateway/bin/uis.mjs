#!/usr/bin/env node
// The `uis` CLI runs from TypeScript source through tsx, so no build step stands between a change and a run.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
