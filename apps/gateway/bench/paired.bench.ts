/**
 * `pnpm bench:paired` in apps/gateway: this tree's gateway against another commit's (`--base`, default main), on
 * the same engines, loaded at the same time, so load drift on a shared machine hits both sides alike and the
 * ratio new/base of CPU per request (or per SSE event) is what a change saves.
 *   tsx bench/paired.bench.ts [--base main] [--rounds 6] [--duration 8] [--stream] [--new-node-args a,b]
 * The base is checked out into a temporary detached worktree (its own `pnpm install --offline`), removed at exit.
 * Both sides are the product's whole stack (uis-gateway-server.ts of each checkout). Each round both load
 * generators run together; which side starts first alternates. CPU of each process comes from /proc (user and
 * system), around its own load generator's window. Nothing is built: both sides run their TypeScript via tsx.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { loadavg, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  defaultEngineKind,
  REPO,
  type ServerKind,
  servingPrefix,
  startEngines,
  startServerProc,
  tsx,
} from './launch.ts';
import type { LoadResult } from './load-stats.ts';
import { type CpuTimes, jsonLines, type Proc, start, stopAll, treeCpuTimes } from './procs.ts';
import { findWrk, runWrk, wrkScript } from './wrk.ts';

const { values: args } = parseArgs({
  options: {
    base: { type: 'string', default: 'main' },
    rounds: { type: 'string', default: '6' },
    duration: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '4' },
    /** wrk connections per side (the ceiling workload). */
    connections: { type: 'string', default: '32' },
    /** The streaming workload instead: chat streams, CPU per SSE event. */
    stream: { type: 'boolean', default: false },
    'stream-concurrency': { type: 'string', default: '256' },
    'stream-tokens': { type: 'string', default: '64' },
    'decode-us': { type: 'string', default: '30000' },
    /** Engines (sim processes) both sides share; default 1 for the ceiling, 2 for streams (as `pnpm bench`). */
    engines: { type: 'string' },
    /** Extra node flags for one side's gateway, comma separated (e.g. --max-semi-space-size=16). */
    'new-node-args': { type: 'string', default: '' },
    'base-node-args': { type: 'string', default: '' },
    /** Extra uis-gateway-server flags for one side (e.g. --front,node). */
    'new-flags': { type: 'string', default: '' },
    'base-flags': { type: 'string', default: '' },
    /** What both sides run: `uis` (the product's whole stack), `core` (the forwarding core), `raw-relay` or
     * `node-relay` (the calibration relays, bench/node-relay.ts): to measure a node flag or an I/O strategy on the
     * least Node does before on the gateway. */
    server: { type: 'string', default: 'uis' },
    /** Scheduling priority of the bench and everything it starts. */
    nice: { type: 'string' },
  },
});
const ROLE = 'rollout';
const SERVED = 'sim-model';
const durationS = Number(args.duration);
const warmupS = Number(args.warmup);
/** Removes the base worktree; set while it exists (an interrupted run removes it too). */
let removeBase: (() => void) | undefined;
const SERVERS: Record<string, ServerKind> = {
  uis: 'uis',
  core: 'core',
  'raw-relay': 'raw relay',
  'node-relay': 'node relay',
};
const server: ServerKind =
  SERVERS[args.server] ??
  (() => {
    throw new Error(`--server: one of ${Object.keys(SERVERS).join(', ')}`);
  })();
const prefix = servingPrefix(server, ROLE);
const list = (s: string | undefined) => (s ?? '').split(',').filter((a) => a !== '');

interface Side {
  name: 'new' | 'base';
  proc: Proc;
  url: string;
}

interface Window {
  /** Requests (ceiling) or SSE events (stream) completed in the window. */
  units: number;
  requests: number;
  durationS: number;
  userMs: number;
  systemMs: number;
  minorFaults: number;
  errors: number;
}

/** A window's counts with the CPU the side spent between `c0` and `c1`. */
function cpuWindow(
  c0: CpuTimes,
  c1: CpuTimes,
  counts: { units: number; requests: number; durationS: number; errors: number },
): Window {
  return {
    units: counts.units,
    requests: counts.requests,
    durationS: counts.durationS,
    userMs: c1.userMs - c0.userMs,
    systemMs: c1.systemMs - c0.systemMs,
    minorFaults: c1.minorFaults - c0.minorFaults,
    errors: counts.errors,
  };
}

function git(cwd: string, ...a: string[]): string {
  const r = spawnSync('git', a, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${a.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

/** A detached worktree of `ref` with its own node_modules (offline install from the shared store). */
function checkoutBase(ref: string): { dir: string; commit: string; remove: () => void } {
  const commit = git(REPO, 'rev-parse', '--verify', `${ref}^{commit}`);
  const dir = join(mkdtempSync(join(tmpdir(), 'uis-paired-')), 'base');
  git(REPO, 'worktree', 'add', '--detach', dir, commit);
  const remove = () => {
    spawnSync('git', ['worktree', 'remove', '--force', dir], { cwd: REPO });
    rmSync(join(dir, '..'), { recursive: true, force: true });
  };
  // No scripts: the base runs from its TypeScript source, its CLI build is not needed.
  const r = spawnSync('pnpm', ['install', '--frozen-lockfile', '--offline', '--ignore-scripts', '--silent'], {
    cwd: dir,
    encoding: 'utf8',
  });
  if (r.status !== 0) {
    remove();
    throw new Error(`pnpm install in the base worktree failed: ${r.stderr}${r.stdout}`);
  }
  linkBuiltDependencies(dir);
  return { dir, commit, remove };
}

/**
 * The install ran no scripts (the root's postinstall would build the CLI), so packages that build on install
 * (`onlyBuiltDependencies`: better-sqlite3's native addon) are unbuilt there. The same version in this tree's
 * virtual store is built and identical otherwise: the base's copy becomes a link to it.
 */
function linkBuiltDependencies(dir: string): void {
  const yaml = readFileSync(join(REPO, 'pnpm-workspace.yaml'), 'utf8');
  const names = [
    ...(/onlyBuiltDependencies:\n((?:\s+- .+\n)+)/.exec(yaml)?.[1] ?? '').matchAll(/- (\S+)/g),
  ].map((m) => m[1]!);
  const store = (root: string) => join(root, 'node_modules/.pnpm');
  for (const entry of readdirSync(store(dir))) {
    const name = names.find((n) => entry.startsWith(`${n.replace('/', '+')}@`));
    if (name === undefined || !existsSync(join(store(REPO), entry))) continue;
    const pkg = join(store(dir), entry, 'node_modules', name);
    rmSync(pkg, { recursive: true, force: true });
    symlinkSync(join(store(REPO), entry, 'node_modules', name), pkg);
  }
}

/** One side's wrk window (the ceiling's POST /generate), CPU read from /proc around it. */
async function wrkWindow(side: Side, script: string, seconds: number): Promise<Window> {
  const c0 = treeCpuTimes(side.proc.pid);
  const r = await runWrk(`${side.url}${prefix}/generate`, Number(args.connections), seconds, script);
  return cpuWindow(c0, treeCpuTimes(side.proc.pid), { units: r.requests, ...r });
}

/** One side's streaming window (bench/stream-load.ts), CPU read at the load generator's window start and end. */
async function streamWindow(side: Side, body: string, seconds: number): Promise<Window> {
  const proc = start(
    `load-${side.name}`,
    ...tsx('stream-load.ts', [
      '--urls',
      `${side.url}${prefix}/v1/chat/completions`,
      '--concurrency',
      String(args['stream-concurrency']),
      '--duration',
      String(seconds),
      '--warmup',
      '2',
      '--body',
      body,
    ]),
  );
  let c0: CpuTimes | undefined;
  let c1: CpuTimes | undefined;
  let load: LoadResult | undefined;
  const exit = await jsonLines(proc, (v) => {
    const line = v as { phase?: string } & LoadResult;
    if (line.phase === 'start') c0 = treeCpuTimes(side.proc.pid);
    else if (line.phase === 'end') c1 = treeCpuTimes(side.proc.pid);
    else load = line;
  });
  if (load === undefined || c0 === undefined || c1 === undefined)
    throw new Error(`${side.name} load generator failed (${exit}): ${proc.stderr.join('').slice(-2000)}`);
  return cpuWindow(c0, c1, { units: load.events, ...load });
}

/** Both sides loaded at once; `first` starts its load generator first. */
async function pairedRound(
  sides: [Side, Side],
  run: (s: Side) => Promise<Window>,
): Promise<Record<'new' | 'base', Window>> {
  const [a, b] = sides;
  const pa = run(a);
  const pb = run(b);
  const [wa, wb] = await Promise.all([pa, pb]);
  return { [a.name]: wa, [b.name]: wb } as Record<'new' | 'base', Window>;
}

const f = (v: number | undefined, d = 1) => (v === undefined || Number.isNaN(v) ? '-' : v.toFixed(d));
const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const perUnit = (w: Window, ms: number) => (ms * 1000) / Math.max(1, w.units);

async function main(): Promise<void> {
  if (args.nice !== undefined) setPriority(Number(args.nice));
  const wrk = findWrk();
  if (!args.stream && 'missing' in wrk) throw new Error(wrk.missing);
  const base = checkoutBase(args.base);
  removeBase = base.remove;
  const head = git(REPO, 'rev-parse', 'HEAD');
  const dirty = git(REPO, 'status', '--porcelain', '--untracked-files=no') !== '';
  try {
    const engines = await startEngines({
      count: Number(args.engines ?? (args.stream ? 2 : 1)),
      kind: defaultEngineKind(),
      served: SERVED,
      decodeUs: args.stream ? Number(args['decode-us']) : 0,
      prefillUs: args.stream ? 200 : 0,
    });
    const launch = async (name: 'new' | 'base', benchDir: string | undefined): Promise<Side> => {
      const { proc, url } = await startServerProc({
        name: `${args.server}-${name}`,
        kind: server,
        engines: engines.urls,
        served: SERVED,
        role: ROLE,
        flags: list(args[`${name}-flags`]),
        nodeArgs: list(args[`${name}-node-args`]),
        ...(benchDir === undefined ? {} : { benchDir }),
      });
      return { name, proc, url };
    };
    const sideNew = await launch('new', undefined);
    const sideBase = await launch('base', join(base.dir, 'apps/gateway/bench'));
    const script = wrkScript(
      JSON.stringify({ text: 'The capital of France is', sampling_params: { max_new_tokens: 8 } }),
    );
    // The gateway gets an alias so it really rewrites `model`, as in `pnpm bench`'s streaming table; a relay
    // forwards the body as it is.
    const streamBody = JSON.stringify({
      model: prefix === '' ? SERVED : 'bench-alias',
      messages: [{ role: 'user', content: 'Write a haiku about GPUs.' }],
      stream: true,
      max_tokens: Number(args['stream-tokens']),
    });
    const run = (seconds: number) => (s: Side) =>
      args.stream ? streamWindow(s, streamBody, seconds) : wrkWindow(s, script, seconds);
    const unit = args.stream ? 'SSE event' : 'request';
    console.log(
      `paired bench, ${server} (${args.stream ? `stream: ${args['stream-concurrency']} chat streams of ${args['stream-tokens']} tokens` : `ceiling: wrk ${args.connections} connections, POST /generate`} per side, ${engines.urls.length} sim engine(s) shared): ` +
        `new = ${head.slice(0, 9)}${dirty ? ' + uncommitted changes' : ''} (this tree${args['new-node-args'] ? `, node ${args['new-node-args']}` : ''}${args['new-flags'] ? `, ${args['new-flags']}` : ''}), ` +
        `base = ${args.base} ${base.commit.slice(0, 9)}${args['base-node-args'] ? ` (node ${args['base-node-args']})` : ''}${args['base-flags'] ? ` (${args['base-flags']})` : ''}; ` +
        `${args.rounds} rounds of ${durationS} s after ${warmupS} s warm-up; load average ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')} at start`,
    );
    await pairedRound([sideNew, sideBase], run(warmupS));
    const rows: string[][] = [];
    const ratios = { total: [] as number[], user: [] as number[], system: [] as number[] };
    const keep: Record<'new' | 'base', Window[]> = { new: [], base: [] };
    for (let r = 0; r < Number(args.rounds); r++) {
      const order: [Side, Side] = r % 2 === 0 ? [sideNew, sideBase] : [sideBase, sideNew];
      const w = await pairedRound(order, run(durationS));
      keep.new.push(w.new);
      keep.base.push(w.base);
      const cpu = (x: Window) => perUnit(x, x.userMs + x.systemMs);
      const ratio = cpu(w.new) / cpu(w.base);
      ratios.total.push(ratio);
      ratios.user.push(perUnit(w.new, w.new.userMs) / perUnit(w.base, w.base.userMs));
      ratios.system.push(perUnit(w.new, w.new.systemMs) / perUnit(w.base, w.base.systemMs));
      rows.push([
        String(r + 1),
        order[0].name,
        f(ratio, 3),
        `${f(cpu(w.new))} (${f(perUnit(w.new, w.new.userMs))} + ${f(perUnit(w.new, w.new.systemMs))})`,
        `${f(cpu(w.base))} (${f(perUnit(w.base, w.base.userMs))} + ${f(perUnit(w.base, w.base.systemMs))})`,
        f(w.new.requests / w.new.durationS, 0),
        f(w.base.requests / w.base.durationS, 0),
        `${w.new.errors} / ${w.base.errors}`,
        loadavg()[0]!.toFixed(2),
      ]);
      console.log(`round ${r + 1}: new/base ${f(ratio, 3)}`);
    }
    printRounds(unit, rows);
    const sumCpu = (ws: Window[], k: 'userMs' | 'systemMs' | 'minorFaults') =>
      ws.reduce((a, w) => a + w[k], 0);
    const units = (ws: Window[]) => ws.reduce((a, w) => a + w.units, 0);
    const allRounds = (ws: Window[]) =>
      `${f(((sumCpu(ws, 'userMs') + sumCpu(ws, 'systemMs')) * 1000) / units(ws))} us/${unit} (user ${f((sumCpu(ws, 'userMs') * 1000) / units(ws))}, system ${f((sumCpu(ws, 'systemMs') * 1000) / units(ws))}; ${f(sumCpu(ws, 'minorFaults') / units(ws), 3)} minor faults/${unit})`;
    console.log(
      `\nmedian new/base CPU per ${unit}: ${f(median(ratios.total), 3)} (user ${f(median(ratios.user), 3)}, system ${f(median(ratios.system), 3)}); ` +
        `all rounds: new ${allRounds(keep.new)}, base ${allRounds(keep.base)}; load average ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')} at end`,
    );
  } finally {
    await stopAll();
    base.remove();
    removeBase = undefined;
  }
}

function printRounds(unit: string, rows: string[][]): void {
  const header = [
    'round',
    'first',
    `new/base CPU per ${unit}`,
    `new us/${unit} (user + sys)`,
    `base us/${unit} (user + sys)`,
    'new req/s',
    'base req/s',
    'errors new / base',
    'load 1 min',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (row: string[]) => `| ${row.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(`\n${line(header)}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
}

const cleanup = () => {
  void stopAll().then(() => {
    removeBase?.();
    process.exit(130);
  });
};
process.on('SIGINT', cleanup);
process.on('SIGTERM', cleanup);
main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
