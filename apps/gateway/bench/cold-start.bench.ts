/**
 * Cold start of `uis plan --config examples/demo.yaml`, side by side in one run: before = the TypeScript source
 * through tsx (what `uis` did until it was compiled, and what `uis-dev` does now), after = the compiled CLI
 * (`bin/uis.mjs` -> `dist/cli/uis.mjs`). Runs alternate so machine load hits both alike. Target: after/before
 * <= 0.3. `node -e 0` is printed as the floor no CLI can go under.
 *   tsx bench/cold-start.bench.ts [--runs 10]
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const gateway = join(import.meta.dirname, '..');
const repo = join(gateway, '..', '..');
const { values } = parseArgs({ options: { runs: { type: 'string', default: '10' } } });
const runs = Number(values.runs);

if (!existsSync(join(gateway, 'dist', 'cli', 'uis.mjs'))) {
  console.log('building the compiled CLI first (pnpm build --filter @uis/gateway)');
  const b = spawnSync(
    'pnpm',
    ['exec', 'turbo', 'run', 'build', '--filter=@uis/gateway', '--output-logs=errors-only'],
    {
      cwd: repo,
      stdio: 'inherit',
    },
  );
  if (b.status !== 0) process.exit(1);
}

const plan = ['plan', '--config', join(repo, 'examples', 'demo.yaml')];
const cases = [
  { name: 'node -e 0 (floor)', args: ['-e', '0'] },
  { name: 'before: tsx from source', args: [join(gateway, 'bin', 'uis-dev.mjs'), ...plan] },
  { name: 'after: compiled uis', args: [join(gateway, 'bin', 'uis.mjs'), ...plan] },
];

// Each process reports its own CPU time and peak RSS on exit: wall time on a loaded machine is mostly waiting for
// a core, CPU time is what the start costs.
const REPORT = `data:text/javascript,process.on('exit',()=>{const u=process.resourceUsage();process.stderr.write('\\nuis-bench '+(u.userCPUTime+u.systemCPUTime)+' '+u.maxRSS+'\\n')})`;

interface Sample {
  wallMs: number;
  cpuMs: number;
  rssMb: number;
}

/** One run; a run that fails stops the bench (a fast failure is no cold start). */
function once(args: string[]): Sample {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, ['--import', REPORT, ...args], { cwd: repo, encoding: 'utf8' });
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const report = /uis-bench (\d+) (\d+)/.exec(r.stderr);
  if (r.status !== 0 || !report) throw new Error(`node ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return { wallMs, cpuMs: Number(report[1]) / 1000, rssMb: Number(report[2]) / 1024 };
}

const samples = cases.map(() => [] as Sample[]);
once(cases[2]!.args); // warm the file cache once, for both sides
for (let i = 0; i < runs; i++) {
  for (const [k, c] of cases.entries()) samples[k]!.push(once(c.args));
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const of = (k: number, f: keyof Sample) => median(samples[k]!.map((x) => x[f]));
const col = (v: string) => v.padStart(12);
console.log(
  `\nuis plan --config examples/demo.yaml: medians of ${runs} alternating runs, load average ${loadavg()[0]!.toFixed(1)}`,
);
console.log(`${'case'.padEnd(26)}${col('wall')}${col('cpu')}${col('peak rss')}`);
for (const [k, c] of cases.entries()) {
  const row = [
    `${of(k, 'wallMs').toFixed(0)} ms`,
    `${of(k, 'cpuMs').toFixed(0)} ms`,
    `${of(k, 'rssMb').toFixed(0)} MB`,
  ];
  console.log(`${c.name.padEnd(26)}${row.map(col).join('')}`);
}
for (const f of ['wallMs', 'cpuMs'] as const) {
  const ratio = of(2, f) / of(1, f);
  const what = f === 'wallMs' ? 'wall' : 'cpu';
  console.log(
    `after / before, ${what}: ${ratio.toFixed(2)}x (target <= 0.30x: ${ratio <= 0.3 ? 'met' : 'NOT met'})`,
  );
}
