/**
 * `pnpm bench:multicore` in apps/gateway: the multi-core data-plane prototype (bench/multicore/) with 1 serving
 * worker and with 2, side by side in rounds, each worker thread pinned to its own core (`taskset -p -c`), against
 * the same zero-latency sim engine, load from wrk (64 connections, the ceiling's /generate).
 *
 * The figure is per core: requests per second of worker CPU (requests / worker threads' CPU seconds, read from
 * /proc), 2 workers vs 1. On this 2-core machine the engine and wrk share the workers' cores, so raw requests/s
 * cannot double; CPU per request is what says whether a second worker costs anything (lock-free shared state,
 * one more event loop polling the socket) and so what N workers give on a head node with cores to spare.
 */
import { execFileSync } from 'node:child_process';
import { cpus, setPriority } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { firstJsonLine, freePort, type Proc, start, stop, stopAll, waitHttpOk } from './procs.ts';
import { findWrk, runWrk, wrkScript } from './wrk.ts';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../../..');
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '64' },
    /** Cores available to the data plane on the head node the paper figure is for. */
    'head-cores': { type: 'string', default: '16' },
    nice: { type: 'string' },
  },
});
if (args.nice !== undefined) setPriority(Number(args.nice));

async function startEngine(): Promise<{ url: string; proc: Proc }> {
  const port = await freePort();
  const proc = start('engine', process.execPath, [
    join(repo, 'packages/sglang-sim/bin/sglang-sim.mjs'),
    ...['--host', '127.0.0.1', '--port', String(port), '--served-model-name', 'sim-model'],
    ...['--sim-decode-us-per-token', '0', '--sim-prefill-us-per-token', '0', '--skip-server-warmup'],
  ]);
  const url = `http://127.0.0.1:${port}`;
  await waitHttpOk(`${url}/health`);
  return { url, proc };
}

interface Stats {
  workers: Array<{ tid: number; cpuMs: number }>;
  admitted: number;
  inFlight: number[];
}

interface Round {
  rps: number;
  requests: number;
  p99: number;
  /** wrk's errors, of them its 2 s timeouts (a loaded machine makes some; the gateway refuses nothing here). */
  errors: number;
  timeouts: number;
  workerCpuMs: number;
  /** Each worker's share of that CPU (how evenly the kernel spread the connections). */
  split: number[];
  /** Shared state once the load stopped: every slot given back (exact counts). */
  settled: boolean;
}

async function oneRun(engine: string, workers: number, script: string): Promise<Round> {
  const proc = start(`multicore-${workers}`, process.execPath, [
    '--import',
    'tsx',
    join(here, 'multicore/gateway.ts'),
    ...['--engines', engine, '--workers', String(workers)],
  ]);
  try {
    const ready = await firstJsonLine<{ port: number; control: number; tids: number[] }>(proc);
    // Worker k on core k: each worker thread has a core of its own.
    const ncpu = cpus().length;
    ready.tids.forEach((tid, k) => {
      execFileSync('taskset', ['-p', '-c', String(k % ncpu), String(tid)], { stdio: 'ignore' });
    });
    const url = `http://127.0.0.1:${ready.port}/rollout/generate`;
    const stats = async () =>
      (await (await fetch(`http://127.0.0.1:${ready.control}/stats`)).json()) as Stats;
    const conns = Number(args.connections);
    await runWrk(url, conns, Number(args.warmup), script);
    const before = await stats();
    const load = await runWrk(url, conns, Number(args.duration), script);
    const after = await stats();
    const cpu = (s: Stats) => s.workers.reduce((a, w) => a + w.cpuMs, 0);
    // wrk has stopped: nothing may be left counted in the shared state.
    let settled = false;
    for (let i = 0; i < 50 && !settled; i++) {
      const s = await stats();
      settled = s.admitted === 0 && s.inFlight.every((n) => n === 0);
      if (!settled) await new Promise((r) => setImmediate(r));
    }
    return {
      rps: load.rps,
      requests: load.requests,
      p99: load.p99Ms,
      errors: load.errors,
      timeouts: load.timeouts,
      workerCpuMs: cpu(after) - cpu(before),
      split: after.workers.map(
        (w, k) => (w.cpuMs - before.workers[k]!.cpuMs) / Math.max(1, cpu(after) - cpu(before)),
      ),
      settled,
    };
  } finally {
    await stop(proc);
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
const f = (v: number, d = 0) => v.toFixed(d);
const cell = (xs: number[], d = 0) => `${f(median(xs), d)} (${xs.map((x) => f(x, d)).join(', ')})`;

async function main(): Promise<void> {
  const wrk = findWrk();
  if (!('bin' in wrk)) throw new Error(`wrk is needed: ${wrk.missing}`);
  const engine = await startEngine();
  const script = wrkScript(
    JSON.stringify({ text: 'The capital of France is', sampling_params: { max_new_tokens: 8 } }),
  );
  const runs: Record<1 | 2, Round[]> = { 1: [], 2: [] };
  try {
    for (let r = 0; r < Number(args.rounds); r++) {
      for (const w of r % 2 === 0 ? ([1, 2] as const) : ([2, 1] as const))
        runs[w].push(await oneRun(engine.url, w, script));
    }
  } finally {
    await stop(engine.proc);
    await stopAll();
  }
  const perCore = (x: Round) => x.requests / (x.workerCpuMs / 1000);
  const ratios = runs[2].map((x, i) => perCore(x) / perCore(runs[1][i]!));
  const rows: Array<[string, string, string]> = [
    ['requests/s', cell(runs[1].map((x) => x.rps)), cell(runs[2].map((x) => x.rps))],
    [
      'errors (of them wrk 2 s timeouts)',
      runs[1].map((x) => `${x.errors} (${x.timeouts})`).join(', '),
      runs[2].map((x) => `${x.errors} (${x.timeouts})`).join(', '),
    ],
    [
      'p99 ms',
      cell(
        runs[1].map((x) => x.p99),
        1,
      ),
      cell(
        runs[2].map((x) => x.p99),
        1,
      ),
    ],
    [
      'worker CPU us/request',
      cell(
        runs[1].map((x) => (x.workerCpuMs * 1000) / x.requests),
        1,
      ),
      cell(
        runs[2].map((x) => (x.workerCpuMs * 1000) / x.requests),
        1,
      ),
    ],
    ['requests/s per worker-core', cell(runs[1].map(perCore)), cell(runs[2].map(perCore))],
    ['per-core ratio, 2 workers vs 1', '-', cell(ratios, 3)],
    [
      'CPU split between workers, by round',
      '-',
      runs[2].map((x) => x.split.map((v) => `${f(v * 100)} %`).join(' / ')).join(', '),
    ],
    [
      'shared state settled after load',
      runs[1].every((x) => x.settled) ? 'yes' : 'NO',
      runs[2].every((x) => x.settled) ? 'yes' : 'NO',
    ],
  ];
  console.log(
    `\n### multi-core prototype: ${args.rounds} rounds, ${args.duration} s each, wrk -c${args.connections}, ${cpus().length} CPUs, each worker thread pinned to its own core\n`,
  );
  console.log('| median (by round) | 1 worker | 2 workers |\n|---|---|---|');
  for (const [name, a, b] of rows) console.log(`| ${name} | ${a} | ${b} |`);
  const core = median(runs[1].map(perCore));
  const ratio = median(ratios);
  const head = Number(args['head-cores']);
  // On paper: one core for the owner thread (control plane) and one for the kernel's network work; every other
  // core a serving worker at the measured per-core rate times the measured 2-vs-1 efficiency.
  const workers = head - 2;
  console.log(
    `- on paper, a ${head}-core head node: ${workers} workers x ${f(core)} req/s per core x ${f(ratio, 2)} = ${f(workers * core * ratio)} req/s of ceiling traffic (engines and load elsewhere; one core kept for the control plane, one for the kernel's network work)`,
  );
}

main().catch(async (e: unknown) => {
  console.error(e);
  await stopAll();
  process.exitCode = 1;
});
