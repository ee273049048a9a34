/**
 * Cold start of the compiled `uis` CLI against a bare `node -e 0`, side by side in one run: `uis --version` and
 * `uis plan --config examples/demo.yaml` (each subcommand's code loads only when it runs, so neither reads the server's
 * modules). Runs alternate so machine load hits every case alike. Target: each <= 3x `node -e 0`.
 *   tsx bench/cold-start.bench.ts [--runs 10] [--bin path/to/uis.mjs]   (--bin: another build, e.g. an older one)
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const gateway = join(import.meta.dirname, '..');
const repo = join(gateway, '..', '..');
const { values } = parseArgs({
  options: { runs: { type: 'string', default: '10' }, bin: { type: 'string' } },
});
const runs = Number(values.runs);
const bin = values.bin === undefined ? join(gateway, 'bin', 'uis.mjs') : resolve(values.bin);
const TARGET = 3;

if (values.bin === undefined && !existsSync(join(gateway, 'dist', 'cli', 'uis.mjs'))) {
  console.log('building the compiled CLI first (pnpm build --filter @uis/gateway)');
  const b = spawnSync(
    'pnpm',
    ['exec', 'turbo', 'run', 'build', '--filter=@uis/gateway', '--output-logs=errors-only'],
    { cwd: repo, stdio: 'inherit' },
  );
  if (b.status !== 0) process.exit(1);
}

const cases = [
  { name: 'node -e 0 (reference)', args: ['-e', '0'] },
  { name: 'uis --version', args: [bin, '--version'] },
  // --config rather than the file as argument: older builds (--bin) take only that.
  {
    name: 'uis plan --config demo.yaml',
    args: [bin, 'plan', '--config', join(repo, 'examples', 'demo.yaml')],
  },
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
for (const c of cases) once(c.args); // warm the file cache once, for every case
for (let i = 0; i < runs; i++) {
  for (const [k, c] of cases.entries()) samples[k]!.push(once(c.args));
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const of = (k: number, f: keyof Sample) => median(samples[k]!.map((x) => x[f]));
const col = (v: string, w = 12) => v.padStart(w);
console.log(
  `\ncold start of ${bin}: medians of ${runs} alternating runs, load average ${loadavg()[0]!.toFixed(1)}`,
);
console.log(
  `${'case'.padEnd(30)}${col('wall')}${col('cpu')}${col('peak rss')}${col('wall / ref', 13)}${col('cpu / ref', 13)}`,
);
for (const [k, c] of cases.entries()) {
  const row = [
    `${of(k, 'wallMs').toFixed(0)} ms`,
    `${of(k, 'cpuMs').toFixed(0)} ms`,
    `${of(k, 'rssMb').toFixed(0)} MB`,
  ];
  const ratios = [
    `${(of(k, 'wallMs') / of(0, 'wallMs')).toFixed(2)}x`,
    `${(of(k, 'cpuMs') / of(0, 'cpuMs')).toFixed(2)}x`,
  ];
  console.log(
    `${c.name.padEnd(30)}${row.map((v) => col(v)).join('')}${ratios.map((v) => col(v, 13)).join('')}`,
  );
}
for (const k of [1, 2]) {
  const ratio = of(k, 'wallMs') / of(0, 'wallMs');
  console.log(
    `${cases[k]!.name} / node -e 0, wall: ${ratio.toFixed(2)}x (target <= ${TARGET}x: ${ratio <= TARGET ? 'met' : 'NOT met'})`,
  );
}
