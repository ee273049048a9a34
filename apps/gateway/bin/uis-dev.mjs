#!/usr/bin/env node
// `uis` from its TypeScript source through tsx: no build step between a change and a run (contributors, tests).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
