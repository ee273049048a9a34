#!/usr/bin/env node
// Runs `uis plan --compare` on every bundled example config (placements, memory per phase and switch, and the
// configured vs optimized defer order). `bad-*` examples are
// invalid on purpose and must exit 1; anything else must plan cleanly.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const dir = import.meta.dirname;
const uis = join(dir, '..', 'apps', 'gateway', 'bin', 'uis-dev.mjs');
let failed = 0;
for (const file of readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .sort()) {
  const expected = file.startsWith('bad-') ? 1 : 0;
  console.log(`\n$ uis plan --compare --config examples/${file}`);
  const r = spawnSync(process.execPath, [uis, 'plan', '--compare', '--config', join(dir, file)], {
    stdio: 'inherit',
  });
  if (r.status !== expected) {
    console.error(`examples/${file}: exit ${r.status}, expected ${expected}`);
    failed++;
  }
}
process.exitCode = failed === 0 ? 0 : 1;
