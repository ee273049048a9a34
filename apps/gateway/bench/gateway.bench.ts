/**
 * `pnpm bench` in apps/gateway: direct to the engines vs through nginx vs through our gateway, in one run,
 * against the same engines (sglang-sim processes, or the bench's mini engine with `--engine mini`).
 *   (a) realistic: modelled prefill/decode, N concurrent streaming chat requests (own Node load generator)
 *   (b) ceiling: zero modelled latency, small non-streaming /generate at 64 clients (wrk)
 * Every process (engines, nginx, gateway, load generator) is separate, so none shares the gateway's event loop.
 */

import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, getPriority, loadavg, setPriority } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { GATEWAY_FRONT_DEFAULT as DEFAULT_FRONT } from '@uis/spec';
import { profileLines, profileOf, summarizeProfile } from './cpu-profile.ts';
import { defaultEngineKind, startEngines as launchEngines, startServerProc, tsx } from './launch.ts';
import type { LatencySummary, LoadResult } from './load-stats.ts';
import { findNginx, startNginx } from './nginx.ts';
import {
  type CpuTimes,
  freePort,
  jsonLines,
  type Proc,
  start,
  stop,
  stopAll,
  treeCpuTimes,
} from './procs.ts';
import { findRouter, startRouter } from './sglang-router.ts';
import { findStrace, type SyscallCounts, syscallsDuring } from './syscalls.ts';
import { findWrk, runWrk, type WrkResult, wrkScript } from './wrk.ts';

const { values: args } = parseArgs({
  options: {
    engine: { type: 'string', default: 'auto' },
    engines: { type: 'string', default: '2' },
    'ceiling-engines': { type: 'string', default: '1' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '4' },
    'stream-concurrency': { type: 'string', default: '512' },
    'stream-tokens': { type: 'string', default: '64' },
    'decode-us': { type: 'string', default: '30000' },
    'prefill-us': { type: 'string', default: '200' },
    'ceiling-concurrency': { type: 'string', default: '64' },
    'nginx-workers': { type: 'string', default: '1' },
    only: { type: 'string' },
    /** Leave out the nginx column (quicker iterations; direct and gateway always run). */
    'no-nginx': { type: 'boolean', default: false },
    'no-router': { type: 'boolean', default: false },
    /** Leave out the realistic workload's calibration column: a plain Node relay (bench/node-relay.ts). */
    'no-node-relay': { type: 'boolean', default: false },
    /** Leave out the second calibration column: the same relay with a raw `net` front instead of node:http. */
    'no-raw-relay': { type: 'boolean', default: false },
    /** Also the floor under both relays: the same process passing bytes through with no HTTP at all (`tcp relay`,
     * node-relay.ts `--front tcp`), the least a Node proxy does per request. */
    'tcp-relay': { type: 'boolean', default: false },
    /** Scheduling priority (nice, -20..19) of the bench and so of every process it starts, all columns alike:
     * a negative value (root) keeps other work on a shared machine from preempting the measured processes. */
    nice: { type: 'string' },
    /** nice of the proxy processes only (gateway and nginx alike), e.g. -5: models a proxy that has its own CPU
     * instead of competing with its load generator and engines on the bench's 2 cores. */
    'proxy-nice': { type: 'string' },
    rounds: { type: 'string', default: '3' },
    /** Directory for a V8 CPU profile of the gateway process (node --cpu-prof), written when it stops. */
    'cpu-prof': { type: 'string' },
    /** Sampling interval of that profile, microseconds (finer than node's 1000 us default: stalls of ~1 ms show). */
    'cpu-prof-interval': { type: 'string', default: '250' },
    /** Extra node flags for the gateway process, comma separated (e.g. --max-semi-space-size=32). */
    'gateway-node-args': { type: 'string', default: '' },
    /** `uis` (default): the product's whole stack (ControlPlane + UisServer: InferenceGateway routing with
     * resolveModel + ReplicaSelector, in-flight tracking into the manager, metrics). `core`: the forwarding core
     * alone with plain round robin, to see what the layers above it cost. */
    gateway: { type: 'string', default: 'uis' },
    /** Also run the whole stack without per-request metrics and time series (`gateway bare`): what they cost. */
    'no-bare': { type: 'boolean', default: false },
    /** Also run the whole stack with OpenTelemetry tracing on (`gateway traced`, every request sampled, spans
     * exported over OTLP/HTTP to a sink in this process): what tracing costs when it is enabled. */
    traced: { type: 'boolean', default: false },
    /** Also run the whole stack without its self-protection (`gateway unprotected`: no circuit breakers, no
     * admission gate; the `gateway` column has both): what the protection costs. */
    unprotected: { type: 'boolean', default: false },
    /** Also run the whole stack with the other serving front than the product's default (`gateway node front` or
     * `gateway fast front`, see `gateway.front`): what the fast front saves. */
    'other-front': { type: 'boolean', default: false },
    /** After the ceiling's rounds, count each proxy's syscalls per request with `strace -f -c` over a wrk window of
     * this many seconds (nginx, the relays, the gateway): where a process's system time goes. */
    strace: { type: 'string' },
  },
});
const ROLE = 'rollout';
const SERVED = 'sim-model';
const durationS = Number(args.duration);
const warmupS = Number(args.warmup);
const engineKind = args.engine === 'auto' ? defaultEngineKind() : (args.engine as 'sim' | 'mini');

const startEngines = (count: number, decodeUs: number, prefillUs: number) =>
  launchEngines({ count, kind: engineKind, served: SERVED, decodeUs, prefillUs });

interface Proxy {
  url: string;
  proc: Proc;
  /** CPU time of the process (and its direct children: nginx's workers), user and system apart, from /proc. */
  cpu(): CpuTimes;
  /** The gateway's own view of the last measured window (phases, event-loop delay, pools); `reset` starts one. */
  stats?(reset: boolean): Promise<Record<string, unknown>>;
  /** The first measured window's start on the process's monotonic clock (us): its CPU profile starts there. */
  windowFromUs?: number;
}

/** An OTLP/HTTP endpoint in the bench process that takes span batches and drops them (the traced column's
 * collector: the gateway pays for making and sending spans, not for a real backend). */
async function otlpSink(): Promise<string> {
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.unref();
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
}

/** Gateway diagnostics of every measured window, printed under the tables. */
const diagnostics: string[] = [];

/** `nice -n N cmd ...` when the proxies run at their own priority (every thread of the process inherits it). */
function niced([cmd, rest]: [string, string[]]): [string, string[]] {
  const n = args['proxy-nice'];
  return n === undefined ? [cmd, rest] : ['nice', ['-n', n, cmd, ...rest]];
}

/** The whole stack's variants beside the product default (`gateway`): each a column, each its own process. */
interface GatewayVariant {
  name: string;
  flags: string[];
}

/** The variants this run measures (`--no-bare`, `--traced`, `--unprotected`). */
async function gatewayVariants(): Promise<GatewayVariant[]> {
  return [
    ...(args['no-bare'] ? [] : [{ name: 'gateway bare', flags: ['--bare'] }]),
    ...(args.traced ? [{ name: 'gateway traced', flags: ['--otlp', await otlpSink()] }] : []),
    ...(args.unprotected ? [{ name: 'gateway unprotected', flags: ['--unprotected'] }] : []),
    ...(args['other-front']
      ? [{ name: OTHER_FRONT, flags: ['--front', DEFAULT_FRONT === 'fast' ? 'node' : 'fast'] }]
      : []),
  ];
}

/** Every variant's gateway, started on the same engines. */
async function startVariants(engines: string[]): Promise<Array<{ name: string; proxy: Proxy }>> {
  const out: Array<{ name: string; proxy: Proxy }> = [];
  for (const v of await gatewayVariants()) out.push({ name: v.name, proxy: await startGateway(engines, v) });
  return out;
}

async function startGateway(
  engines: string[],
  variant: GatewayVariant = { name: 'gateway', flags: [] },
): Promise<Proxy> {
  const { proc, url } = await startServerProc({
    name: variant.name.replaceAll(' ', '-'),
    kind: args.gateway === 'core' ? 'core' : 'uis',
    engines,
    served: SERVED,
    role: ROLE,
    flags: variant.flags,
    nodeArgs: [
      ...(args['gateway-node-args'] ?? '').split(',').filter((a) => a !== ''),
      ...(args['cpu-prof'] === undefined
        ? []
        : [
            '--cpu-prof',
            '--cpu-prof-dir',
            resolve(args['cpu-prof']),
            '--cpu-prof-interval',
            String(args['cpu-prof-interval']),
          ]),
    ],
    wrap: niced,
  });
  const stats = statsOf(url);
  const proxy: Proxy = {
    url,
    proc,
    // Read from /proc like the other proxies, not fetched from the gateway: the fetch sent at a window's start
    // could be held until the window's end (a lone request from the otherwise idle bench process), and the
    // window's CPU came out ~0 (0.001 ms/request for the whole stack's streaming column).
    cpu: () => treeCpuTimes(proc.pid),
    // Window diagnostics: the core server adds request phases and pool churn from its own completion hook; the
    // whole stack reports CPU, context switches, event-loop delay and GC.
    stats: async (reset: boolean) => {
      const s = await stats(reset);
      if (reset && proxy.windowFromUs === undefined && typeof s.monoUs === 'number')
        proxy.windowFromUs = s.monoUs;
      return s;
    },
  };
  return proxy;
}

/** `/_bench/stats` of a bench process (the gateways and the node relay): `reset` starts a window. */
const statsOf =
  (url: string) =>
  async (reset: boolean): Promise<Record<string, unknown>> =>
    (await (await fetch(`${url}/_bench/stats${reset ? '?reset' : ''}`)).json()) as Record<string, unknown>;

/** Event-loop delay of one measured window, as its process reported it. */
type LoopDelay = { p99: number; max: number };
const loopOf = (s: Record<string, unknown>): LoopDelay | undefined => {
  const l = s.loopDelayMs as LoopDelay | undefined;
  return l === undefined ? undefined : { p99: l.p99, max: l.max };
};

/** The calibration column: the least a Node streaming relay does (bench/node-relay.ts). */
async function startNodeRelay(engines: string[], front: 'http' | 'raw' | 'tcp'): Promise<Proxy> {
  const { proc, url } = await startServerProc({
    name: `${front}-relay`,
    kind: front === 'http' ? 'node relay' : 'raw relay',
    engines,
    served: SERVED,
    role: ROLE,
    flags: front === 'tcp' ? ['--front', 'tcp'] : [],
    wrap: niced,
  });
  // The tcp relay passes every request to the engine, its own stats request too.
  return {
    url,
    proc,
    cpu: () => treeCpuTimes(proc.pid),
    ...(front === 'tcp' ? {} : { stats: statsOf(url) }),
  };
}

async function startNginxProxy(bin: string, engines: string[]): Promise<Proxy> {
  const port = await freePort();
  const proc = startNginx(bin, {
    port,
    engines,
    role: ROLE,
    workers: Number(args['nginx-workers']),
    ...(args['proxy-nice'] === undefined ? {} : { priority: Number(args['proxy-nice']) }),
  });
  const url = `http://127.0.0.1:${port}`;
  // nginx answers 404 on `/`: it is up once it answers at all.
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await (await fetch(`${url}/`)).arrayBuffer();
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`nginx did not start: ${proc.stderr.join('')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { url, proc, cpu: () => treeCpuTimes(proc.pid) };
}

/** Runs the streaming load generator; CPU of the proxy is sampled exactly around the measured window. */
/** Every column's proxy in front of `engines`: the gateway, its variants, nginx and sglang-router where found, the
 * node relay if asked for. `stopAll` stops them and the engines. */
async function startProxies(
  engines: { urls: string[]; procs: Proc[] },
  nginx: Found<'bin'>,
  router: Found<'python'>,
  withNodeRelay: boolean,
) {
  const gateway = await startGateway(engines.urls);
  const variants = await startVariants(engines.urls);
  const proxyNginx = 'bin' in nginx ? await startNginxProxy(nginx.bin, engines.urls) : undefined;
  const proxyRouter = 'python' in router ? await startRouter(router.python, engines.urls, niced) : undefined;
  const nodeRelay = withNodeRelay ? await startNodeRelay(engines.urls, 'http') : undefined;
  const rawRelay = args['no-raw-relay'] ? undefined : await startNodeRelay(engines.urls, 'raw');
  const tcpRelay = args['tcp-relay'] ? await startNodeRelay(engines.urls, 'tcp') : undefined;
  const stopAll = async (): Promise<void> => {
    const procs = [
      gateway.proc,
      ...variants.map((v) => v.proxy.proc),
      proxyNginx?.proc,
      proxyRouter?.proc,
      nodeRelay?.proc,
      rawRelay?.proc,
      tcpRelay?.proc,
      ...engines.procs,
    ];
    await Promise.all(procs.filter((p) => p !== undefined).map(stop));
  };
  return { gateway, variants, proxyNginx, proxyRouter, nodeRelay, rawRelay, tcpRelay, stopAll };
}

async function streamLoad(
  urls: string[],
  body: string,
  proxy: Proxy | undefined,
): Promise<{ load: LoadResult; loop?: LoopDelay } & WindowCpu> {
  // The window's event-loop delay and GC start before the load does (its ramp included, every column alike): a
  // reset sent at the measured window's start was answered only at its end in most rounds (the process busy with
  // 512 streams), and the window read came out empty.
  await proxy?.stats?.(true).catch((e: unknown) => diagnostics.push(`stats reset failed: ${String(e)}`));
  const proc = start(
    'loadgen',
    ...tsx('stream-load.ts', [
      '--urls',
      urls.join(','),
      '--concurrency',
      String(args['stream-concurrency']),
      '--duration',
      String(durationS),
      '--warmup',
      String(warmupS),
      '--body',
      body,
    ]),
  );
  let load: LoadResult | undefined;
  let cpu0: CpuTimes | undefined;
  let cpuEnd: CpuTimes | undefined;
  let loop: Promise<LoopDelay | undefined> | undefined;
  const exit = await jsonLines(proc, (v) => {
    const line = v as { phase?: string } & LoadResult;
    if (line.phase === 'start') {
      cpu0 = proxy?.cpu();
    } else if (line.phase === 'end') {
      cpuEnd = proxy?.cpu();
      loop = proxy?.stats?.(false).then(
        (s) => {
          diagnostics.push(diagnosticLine(s, proxy?.proc.name ?? '-'));
          return loopOf(s);
        },
        (e: unknown) => {
          diagnostics.push(`stats of ${proxy?.proc.name} unavailable: ${String(e)}`);
          return undefined;
        },
      );
    } else {
      load = line;
      const loop = line.loopDelayMs;
      if (loop !== undefined)
        diagnostics.push(
          `load generator (${proxy === undefined ? 'direct' : proxy.proc.name}): ${line.connects ?? '-'} connects in the window, event-loop delay p50/p99/max ${f(loop.p50, 1)}/${f(loop.p99, 1)}/${f(loop.max, 1)} ms`,
        );
    }
  });
  if (load === undefined)
    throw new Error(`load generator failed (${exit}): ${proc.stderr.join('').slice(-2000)}`);
  const delay = await loop;
  const withLoop = delay === undefined ? {} : { loop: delay };
  if (proxy === undefined || cpu0 === undefined || cpuEnd === undefined) return { load, ...withLoop };
  return { load, ...windowCpu(cpu0, cpuEnd), ...withLoop };
}

async function wrkLoad(
  urls: string[],
  body: string,
  proxy: Proxy | undefined,
): Promise<{ load: WrkResult; loop?: LoopDelay } & WindowCpu> {
  const script = wrkScript(body);
  const conns = Number(args['ceiling-concurrency']);
  const per = Math.max(1, Math.floor(conns / urls.length));
  await Promise.all(urls.map((u) => runWrk(u, per, Math.max(1, warmupS), script)));
  await proxy?.stats?.(true);
  const cpu0 = proxy?.cpu();
  const runs = await Promise.all(urls.map((u) => runWrk(u, per, durationS, script)));
  const cpu1 = proxy?.cpu();
  const stats = await proxy?.stats?.(false);
  const loop = stats === undefined ? undefined : loopOf(stats);
  // Several wrk processes (direct to several engines): sum the rates, weight p50 by requests, keep the worst p99.
  const requests = runs.reduce((a, r) => a + r.requests, 0);
  const load: WrkResult = {
    requests,
    durationS: Math.max(...runs.map((r) => r.durationS)),
    rps: runs.reduce((a, r) => a + r.rps, 0),
    errors: runs.reduce((a, r) => a + r.errors, 0),
    timeouts: runs.reduce((a, r) => a + r.timeouts, 0),
    p50Ms: runs.reduce((a, r) => a + r.p50Ms * r.requests, 0) / Math.max(1, requests),
    p99Ms: Math.max(...runs.map((r) => r.p99Ms)),
  };
  const withLoop = loop === undefined ? {} : { loop };
  return cpu0 === undefined || cpu1 === undefined
    ? { load, ...withLoop }
    : { load, ...windowCpu(cpu0, cpu1), ...withLoop };
}

/** A measured window's CPU: `cpuMs` user + system, `sysMs` of it in the kernel (syscalls, loopback delivery). */
type WindowCpu = { cpuMs?: number; sysMs?: number };
const windowCpu = (a: CpuTimes, b: CpuTimes) => ({
  cpuMs: b.userMs + b.systemMs - a.userMs - a.systemMs,
  sysMs: b.systemMs - a.systemMs,
});

/** One line of gateway phase percentiles: where the time between request-in and first-byte-out went. */
function diagnosticLine(s: Record<string, unknown>, name: string): string {
  const phases = (s.phasesMs ?? {}) as Record<string, LatencySummary>;
  const loop = s.loopDelayMs as { p50: number; p99: number; max: number };
  const gc = s.gc as {
    count: number;
    totalMs: number;
    maxMs: number;
    byKind?: Record<string, { count: number; maxMs: number }>;
  };
  const kinds = Object.entries(gc.byKind ?? {})
    .map(([k, v]) => `${k} ${v.count} (max ${f(v.maxMs, 1)} ms)`)
    .join(', ');
  const cpu = s.windowCpuUs as { user: number; system: number };
  const usage = s.windowUsage as {
    minorFaults: number;
    voluntarySwitches: number;
    involuntarySwitches: number;
  };
  const churn = s.churn as { connects: number; disconnects: number; lastDisconnect?: string } | undefined;
  const pools = Object.values((s.pools ?? {}) as Record<string, { connected: number }>).map(
    (p) => p.connected,
  );
  const parts = Object.entries(phases).map(([k, v]) => `${k} ${f(v.p50, 2)}/${f(v.p99, 2)}`);
  const upstream =
    churn === undefined
      ? ''
      : `, upstream ${churn.connects} opened / ${churn.disconnects} closed so far (${pools.join('+')} open; last close: ${churn.lastDisconnect ?? '-'})`;
  const phaseText = parts.length === 0 ? '' : `; phases p50/p99 ms: ${parts.join(', ')}`;
  const who = name.startsWith('gateway') ? `${name} (${args.gateway})` : name;
  return `${who}: CPU user ${f(cpu.user / 1000, 0)} ms + system ${f(cpu.system / 1000, 0)} ms in the window, ${usage.minorFaults} page faults, ${usage.voluntarySwitches} voluntary / ${usage.involuntarySwitches} involuntary context switches; ${String(s.accepted)} client connections accepted${upstream}${phaseText}; event-loop delay p50/p99/max ${f(loop.p50, 1)}/${f(loop.p99, 1)}/${f(loop.max, 1)} ms; gc ${gc.count} pauses, ${f(gc.totalMs, 0)} ms total, max ${f(gc.maxMs, 1)} ms${kinds === '' ? '' : ` [${kinds}]`}`;
}

/** Runs every column `rounds` times, in a rotated order each round, so load drift on a shared machine does not
 * favour whichever column happens to run first; then merges each column's rounds. */
async function inRounds<T>(
  columns: Array<{ name: string; run: () => Promise<T> }>,
  merge: (runs: T[]) => T,
): Promise<Record<string, T>> {
  const runs: Record<string, T[]> = {};
  const n = Math.max(1, Number(args.rounds));
  for (let r = 0; r < n; r++) {
    const order = r % 2 === 0 ? columns : [...columns].reverse();
    for (const c of order) {
      const result = await c.run();
      runs[c.name] = [...(runs[c.name] ?? []), result];
    }
  }
  return Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, merge(v)]));
}

function mergeSummary(list: LatencySummary[]): LatencySummary {
  const count = list.reduce((a, s) => a + s.count, 0);
  const avg = (k: 'p50' | 'p90' | 'p99') => list.reduce((a, s) => a + s[k] * s.count, 0) / Math.max(1, count);
  return { p50: avg('p50'), p90: avg('p90'), p99: avg('p99'), count };
}

type StreamRun = {
  load: LoadResult;
  cpuMs?: number;
  sysMs?: number;
  loop?: LoopDelay;
  totalP99ByRound?: number[];
  cpuByRound?: string;
  rounds?: StreamRun[];
};

function median(xs: number[]): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1]! + s[m]!) / 2;
}

/** `median (round 1, round 2, ...)`: every round printed beside the median, so the run's noise is visible. */
function medianCell(xs: Array<number | undefined>, digits: number): string {
  const known = xs.filter((x): x is number => x !== undefined && !Number.isNaN(x));
  if (known.length === 0) return '-';
  return `${f(median(known), digits)} (${xs.map((x) => f(x, digits)).join(', ')})`;
}

/** Event-loop delay p99 / max of each round (processes that report it: the gateways and the node relay). */
function loopCell(rounds: Array<{ loop?: LoopDelay }>): string {
  const known = rounds.flatMap((r) => (r.loop === undefined ? [] : [r.loop]));
  if (known.length === 0) return '-';
  const each = rounds.map((r) => (r.loop === undefined ? '-' : `${f(r.loop.p99, 1)}/${f(r.loop.max, 1)}`));
  return `${f(median(known.map((l) => l.p99)), 1)} / ${f(median(known.map((l) => l.max)), 1)} (${each.join(', ')})`;
}

/** Each round's proxy CPU per request, the spread that tells whether two columns differ beyond the run's noise. */
const cpuByRound = (runs: Array<{ cpuMs?: number; requests: number }>, digits: number): string =>
  runs.map((r) => (r.cpuMs === undefined ? '-' : f(r.cpuMs / Math.max(1, r.requests), digits))).join(', ');

function mergeStream(runs: StreamRun[]): StreamRun {
  const sum = (k: 'durationS' | 'requests' | 'errors' | 'events' | 'chunks') =>
    runs.reduce((a, r) => a + r.load[k], 0);
  return {
    load: {
      durationS: sum('durationS'),
      requests: sum('requests'),
      errors: sum('errors'),
      events: sum('events'),
      chunks: sum('chunks'),
      ttfbMs: mergeSummary(runs.map((r) => r.load.ttfbMs)),
      totalMs: mergeSummary(runs.map((r) => r.load.totalMs)),
      gapMs: mergeSummary(runs.map((r) => r.load.gapMs)),
    },
    ...sumCpu(runs),
    totalP99ByRound: runs.map((r) => r.load.totalMs.p99),
    cpuByRound: cpuByRound(
      runs.map((r) => ({ ...(r.cpuMs === undefined ? {} : { cpuMs: r.cpuMs }), requests: r.load.requests })),
      3,
    ),
    rounds: runs,
  };
}

/** The CPU fields of a window, when it has them. */
const cpuOf = (r: WindowCpu): WindowCpu =>
  r.cpuMs === undefined || r.sysMs === undefined ? {} : { cpuMs: r.cpuMs, sysMs: r.sysMs };
/** The CPU of several windows, when every one has it. */
const sumCpu = (runs: WindowCpu[]): WindowCpu =>
  runs.every((r) => r.cpuMs !== undefined && r.sysMs !== undefined)
    ? { cpuMs: runs.reduce((a, r) => a + r.cpuMs!, 0), sysMs: runs.reduce((a, r) => a + r.sysMs!, 0) }
    : {};
/** `user + system` per unit, each the median over rounds: where a process's CPU goes, in V8/libuv or in the
 * kernel. */
function splitCell(rounds: WindowCpu[], units: (i: number) => number): string {
  const per = (k: 'user' | 'sys') =>
    rounds.flatMap((r, i) =>
      r.cpuMs === undefined || r.sysMs === undefined
        ? []
        : [((k === 'sys' ? r.sysMs : r.cpuMs - r.sysMs) * 1000) / Math.max(1, units(i))],
    );
  const user = per('user');
  return user.length === 0 ? '-' : `${f(median(user), 1)} + ${f(median(per('sys')), 1)}`;
}

type Column = { name: string; cells: Record<string, string> } | { name: string; skipped: string };

const f = (v: number | null | undefined, digits = 1) =>
  v === undefined || v === null || Number.isNaN(v) ? '-' : v.toFixed(digits);
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? '-' : `${(a / b).toFixed(3)}x`;

function printTable(title: string, rows: string[], columns: Column[], notes: string[]): void {
  const header = ['', ...columns.map((c) => c.name)];
  const body = rows.map((r) => [
    r,
    ...columns.map((c) => ('skipped' in c ? 'skipped' : (c.cells[r] ?? '-'))),
  ]);
  const widths = header.map((_, i) => Math.max(...[header, ...body].map((row) => row[i]!.length)));
  const line = (row: string[]) => `| ${row.map((cell, i) => cell.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(`\n### ${title}\n`);
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const row of body) console.log(line(row));
  for (const c of columns) if ('skipped' in c) console.log(`- ${c.name} skipped: ${c.skipped}`);
  for (const n of notes) console.log(`- ${n}`);
}

type Found<K extends string> = { [k in K]: string } | { missing: string };

async function realistic(nginx: Found<'bin'>, router: Found<'python'>): Promise<void> {
  const tokens = Number(args['stream-tokens']);
  const engines = await startEngines(
    Number(args.engines),
    Number(args['decode-us']),
    Number(args['prefill-us']),
  );
  const { gateway, variants, proxyNginx, proxyRouter, nodeRelay, rawRelay, tcpRelay, stopAll } =
    await startProxies(engines, nginx, router, !args['no-node-relay']);
  const body = (model: string) =>
    JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'Write a haiku about GPUs.' }],
      stream: true,
      max_tokens: tokens,
    });
  try {
    const columns = [
      {
        name: 'direct',
        run: () =>
          streamLoad(
            engines.urls.map((u) => `${u}/v1/chat/completions`),
            body(SERVED),
            undefined,
          ),
      },
      ...(proxyNginx
        ? [
            {
              name: 'nginx',
              run: () =>
                streamLoad([`${proxyNginx.url}/${ROLE}/v1/chat/completions`], body(SERVED), proxyNginx),
            },
          ]
        : []),
      ...(proxyRouter
        ? [
            {
              name: 'sglang-router',
              run: () => streamLoad([`${proxyRouter.url}/v1/chat/completions`], body(SERVED), proxyRouter),
            },
          ]
        : []),
      ...(nodeRelay
        ? [
            {
              name: 'node relay',
              run: () => streamLoad([`${nodeRelay.url}/v1/chat/completions`], body(SERVED), nodeRelay),
            },
          ]
        : []),
      ...(rawRelay
        ? [
            {
              name: 'raw relay',
              run: () => streamLoad([`${rawRelay.url}/v1/chat/completions`], body(SERVED), rawRelay),
            },
          ]
        : []),
      ...(tcpRelay
        ? [
            {
              name: 'tcp relay',
              run: () => streamLoad([`${tcpRelay.url}/v1/chat/completions`], body(SERVED), tcpRelay),
            },
          ]
        : []),
      // The gateway gets an alias so it really rewrites `model` (one parse + one serialize per request).
      {
        name: 'gateway',
        run: () => streamLoad([`${gateway.url}/${ROLE}/v1/chat/completions`], body('bench-alias'), gateway),
      },
      ...variants.map(({ name, proxy }) => ({
        name,
        run: () => streamLoad([`${proxy.url}/${ROLE}/v1/chat/completions`], body('bench-alias'), proxy),
      })),
    ];
    const results = await inRounds<StreamRun>(columns, mergeStream);
    for (const { name, proxy } of [{ name: 'gateway', proxy: gateway }, ...variants])
      profiled.push({
        fromUs: proxy.windowFromUs,
        table: 'streaming',
        name,
        pid: proxy.proc.pid,
        unit: 'SSE event',
        cpuUs: median(
          (results[name]?.rounds ?? []).flatMap((x) =>
            x.cpuMs === undefined ? [] : [(x.cpuMs * 1000) / Math.max(1, x.load.events)],
          ),
        ),
      });
    const d = results.direct!.load;
    const rps = (l: LoadResult) => l.requests / l.durationS;
    const cpuCount = cpus().length;
    const cols: Column[] = COLUMN_NAMES.map((name) => {
      const r = results[name];
      if (r === undefined) return { name, skipped: missingReason(name, nginx, router) };
      const l = r.load;
      const cpuPerEventMs = r.cpuMs === undefined ? undefined : r.cpuMs / Math.max(1, l.events);
      const directByRound = results.direct!.totalP99ByRound ?? [];
      return {
        name,
        cells: {
          'requests/s': f(rps(l)),
          'SSE events/s': f(l.events / l.durationS, 0),
          'chunks/s (client reads)': f(l.chunks / l.durationS, 0),
          errors: String(l.errors),
          'TTFB p50 / p99 ms': `${f(l.ttfbMs.p50, 2)} / ${f(l.ttfbMs.p99, 2)}`,
          'total p50 / p99 ms': `${f(l.totalMs.p50, 1)} / ${f(l.totalMs.p99, 1)}`,
          'added total p50 / p99 ms':
            name === 'direct'
              ? '-'
              : `${f(l.totalMs.p50 - d.totalMs.p50, 2)} / ${f(l.totalMs.p99 - d.totalMs.p99, 2)}`,
          'added TTFB p50 / p99 ms':
            name === 'direct'
              ? '-'
              : `${f(l.ttfbMs.p50 - d.ttfbMs.p50, 2)} / ${f(l.ttfbMs.p99 - d.ttfbMs.p99, 2)}`,
          'added total p99 ms: median (by round)':
            name === 'direct'
              ? '-'
              : medianCell(
                  (r.totalP99ByRound ?? []).map((p, i) => p - (directByRound[i] ?? Number.NaN)),
                  1,
                ),
          'inter-chunk p50 / p99 ms': `${f(l.gapMs.p50, 2)} / ${f(l.gapMs.p99, 2)}`,
          'proxy CPU ms/request': r.cpuMs === undefined ? '-' : f(r.cpuMs / l.requests, 3),
          'proxy CPU ms/request by round': name === 'direct' ? '-' : (r.cpuByRound ?? '-'),
          'proxy CPU us/event': cpuPerEventMs === undefined ? '-' : f(cpuPerEventMs * 1000, 1),
          'proxy CPU us/event: median (by round)':
            name === 'direct'
              ? '-'
              : medianCell(
                  (r.rounds ?? []).map((x) =>
                    x.cpuMs === undefined ? undefined : (x.cpuMs * 1000) / Math.max(1, x.load.events),
                  ),
                  1,
                ),
          'proxy CPU us/event, user + system: medians':
            name === 'direct' ? '-' : splitCell(r.rounds ?? [], (i) => r.rounds![i]!.load.events),
          'event-loop delay p99 / max ms: median (by round)': loopCell(r.rounds ?? []),
          // Every stream of an engine gets its token in the same decode step: the proxy relays bursts of
          // (concurrency) events that it, the engines and the load generator work off on the same cores. The
          // last event of a burst is then late by about the proxy's share of that work.
          'model: burst x CPU/event / CPUs, ms':
            cpuPerEventMs === undefined
              ? '-'
              : f((Number(args['stream-concurrency']) * cpuPerEventMs) / cpuCount, 1),
          'vs direct (req/s)': ratio(rps(l), rps(d)),
          'vs nginx (req/s)': results.nginx ? ratio(rps(l), rps(results.nginx.load)) : '-',
          'vs sglang-router (req/s)': results['sglang-router']
            ? ratio(rps(l), rps(results['sglang-router'].load))
            : '-',
        },
      };
    });
    printTable(
      `(a) realistic: ${args['stream-concurrency']} concurrent streaming chat, ${tokens} tokens, decode ${Number(args['decode-us']) / 1000} ms/token, ${engines.urls.length} ${engineKind} engines`,
      Object.keys((cols[0] as { cells: Record<string, string> }).cells),
      cols,
      [
        `${args.rounds} rounds per column in rotated order; latency rows are request-weighted means of per-round percentiles`,
        'targets: gateway >= 0.98x direct requests/s, added p50 < 1 ms, added p99 < 5 ms; gateway >= 1.0x sglang-router requests/s with no worse p99',
        ROUTER_NOTE,
        'node relay: calibration, not a product: node:http + raw engine sockets relaying the chunked answer byte for byte, nothing else (bench/node-relay.ts); where Node itself lands on this machine',
        `model row: a decode step's burst of ${args['stream-concurrency']} events times the proxy's CPU per event, shared by ${cpuCount} CPUs with the engines and the load generator; the added p99 follows it`,
      ],
    );
  } finally {
    await stopAll();
  }
}

const OTHER_FRONT = DEFAULT_FRONT === 'fast' ? 'gateway node front' : 'gateway fast front';
const VARIANT_NAMES = ['gateway bare', 'gateway traced', 'gateway unprotected', OTHER_FRONT];
/** Every column of both tables, in print order. */
const COLUMN_NAMES = [
  'direct',
  'nginx',
  'sglang-router',
  'node relay',
  'raw relay',
  'tcp relay',
  'gateway',
  ...VARIANT_NAMES,
];

/** Gateway processes whose CPU profile (`--cpu-prof`) is summarized once they stop. */
const profiled: Array<{
  table: string;
  name: string;
  pid: number;
  unit: string;
  cpuUs: number | undefined;
  fromUs: number | undefined;
}> = [];

/** The per-part CPU breakdown and stall sources of every profiled gateway process (see cpu-profile.ts). */
function printProfiles(): void {
  const dir = args['cpu-prof'];
  if (dir === undefined || profiled.length === 0) return;
  console.log(
    `\n### Where the gateway's time goes (--cpu-prof, sampled every ${args['cpu-prof-interval']} us; the profiler itself adds CPU)\n`,
  );
  for (const p of profiled) {
    const file = profileOf(resolve(dir), p.pid);
    if (file === undefined) {
      console.log(`- ${p.table} / ${p.name}: no profile written by pid ${p.pid}`);
      continue;
    }
    const lines = profileLines(
      `#### ${p.table} / ${p.name}`,
      summarizeProfile(file, p.fromUs),
      p.cpuUs,
      p.unit,
    );
    console.log(`${lines.join('\n')}\n`);
  }
}

const ROUTER_NOTE =
  'sglang-router: the real router (python -m sglang_router.launch_router), round_robin, --log-level warn, the same engines as --worker-urls';

function missingReason(name: string, nginx: Found<'bin'>, router: Found<'python'>): string {
  if (name === 'nginx' && 'missing' in nginx) return nginx.missing;
  if (name === 'sglang-router' && 'missing' in router) return router.missing;
  if (name === 'node relay' && args['no-node-relay']) return '--no-node-relay';
  if (name === 'raw relay' && args['no-raw-relay']) return '--no-raw-relay';
  if (name === 'tcp relay' && !args['tcp-relay']) return 'needs --tcp-relay';
  if (name === 'gateway bare' && args['no-bare']) return '--no-bare';
  if (name === 'gateway traced' && !args.traced) return 'needs --traced';
  if (name === 'gateway unprotected' && !args.unprotected) return 'needs --unprotected';
  if (name === OTHER_FRONT && !args['other-front']) return 'needs --other-front';
  return 'not run';
}

async function ceiling(nginx: Found<'bin'>, router: Found<'python'>): Promise<void> {
  const wrk = findWrk();
  const engines = await startEngines(Number(args['ceiling-engines']), 0, 0);
  const { gateway, variants, proxyNginx, proxyRouter, nodeRelay, rawRelay, tcpRelay, stopAll } =
    await startProxies(engines, nginx, router, !args['no-node-relay']);
  const body = JSON.stringify({ text: 'The capital of France is', sampling_params: { max_new_tokens: 8 } });
  try {
    type CeilingRun = {
      rps: number;
      durationS: number;
      requests: number;
      errors: number;
      /** Of `errors`, wrk's 2 s timeouts (0 with the node load generator). */
      timeouts: number;
      p50: number;
      p99: number;
      cpuMs?: number;
      sysMs?: number;
      cpuByRound?: string;
      loop?: LoopDelay;
      rounds?: CeilingRun[];
    };
    const run = async (urls: string[], proxy: Proxy | undefined): Promise<CeilingRun> => {
      if ('bin' in wrk) {
        const r = await wrkLoad(urls, body, proxy);
        const l = r.load;
        return {
          ...l,
          p50: l.p50Ms,
          p99: l.p99Ms,
          ...cpuOf(r),
          ...(r.loop === undefined ? {} : { loop: r.loop }),
        };
      }
      const save = args['stream-concurrency'];
      args['stream-concurrency'] = args['ceiling-concurrency'];
      const r = await streamLoad(urls, body, proxy);
      args['stream-concurrency'] = save;
      const l = r.load;
      return {
        rps: l.requests / l.durationS,
        durationS: l.durationS,
        requests: l.requests,
        errors: l.errors,
        timeouts: 0,
        p50: l.totalMs.p50,
        p99: l.totalMs.p99,
        ...cpuOf(r),
        ...(r.loop === undefined ? {} : { loop: r.loop }),
      };
    };
    const merge = (runs: CeilingRun[]): CeilingRun => {
      const requests = runs.reduce((a, r) => a + r.requests, 0);
      const durationS = runs.reduce((a, r) => a + r.durationS, 0);
      const weighted = (k: 'p50' | 'p99') =>
        runs.reduce((a, r) => a + r[k] * r.requests, 0) / Math.max(1, requests);
      return {
        rps: requests / durationS,
        durationS,
        requests,
        errors: runs.reduce((a, r) => a + r.errors, 0),
        timeouts: runs.reduce((a, r) => a + r.timeouts, 0),
        p50: weighted('p50'),
        p99: weighted('p99'),
        ...sumCpu(runs),
        cpuByRound: cpuByRound(runs, 4),
        rounds: runs,
      };
    };
    const results = await inRounds(
      [
        {
          name: 'direct',
          run: () =>
            run(
              engines.urls.map((u) => `${u}/generate`),
              undefined,
            ),
        },
        ...(proxyNginx
          ? [{ name: 'nginx', run: () => run([`${proxyNginx.url}/${ROLE}/generate`], proxyNginx) }]
          : []),
        ...(proxyRouter
          ? [{ name: 'sglang-router', run: () => run([`${proxyRouter.url}/generate`], proxyRouter) }]
          : []),
        ...(nodeRelay
          ? [{ name: 'node relay', run: () => run([`${nodeRelay.url}/generate`], nodeRelay) }]
          : []),
        ...(rawRelay ? [{ name: 'raw relay', run: () => run([`${rawRelay.url}/generate`], rawRelay) }] : []),
        ...(tcpRelay ? [{ name: 'tcp relay', run: () => run([`${tcpRelay.url}/generate`], tcpRelay) }] : []),
        { name: 'gateway', run: () => run([`${gateway.url}/${ROLE}/generate`], gateway) },
        ...variants.map(({ name, proxy }) => ({
          name,
          run: () => run([`${proxy.url}/${ROLE}/generate`], proxy),
        })),
      ],
      merge,
    );
    const d = results.direct!;
    const rounds = (r: CeilingRun) => r.rounds ?? [r];
    const medianRps = (r: CeilingRun | undefined) =>
      r === undefined ? undefined : median(rounds(r).map((x) => x.rps));
    const cpuUs = (x: CeilingRun) => (x.cpuMs === undefined ? undefined : (x.cpuMs * 1000) / x.requests);
    const names = COLUMN_NAMES;
    for (const { name, proxy } of [{ name: 'gateway', proxy: gateway }, ...variants])
      profiled.push({
        fromUs: proxy.windowFromUs,
        table: 'ceiling',
        name,
        pid: proxy.proc.pid,
        unit: 'request',
        cpuUs: median(rounds(results[name]!).flatMap((x) => cpuUs(x) ?? [])),
      });
    const cols: Column[] = names.map((name) => {
      const r = results[name];
      if (r === undefined) return { name, skipped: missingReason(name, nginx, router) };
      const directP99 = rounds(d).map((x) => x.p99);
      return {
        name,
        cells: {
          'requests/s: median (by round)': medianCell(
            rounds(r).map((x) => x.rps),
            0,
          ),
          'added p99 ms: median (by round)':
            name === 'direct'
              ? '-'
              : medianCell(
                  rounds(r).map((x, i) => x.p99 - (directP99[i] ?? Number.NaN)),
                  2,
                ),
          'proxy CPU us/request: median (by round)':
            name === 'direct' ? '-' : medianCell(rounds(r).map(cpuUs), 1),
          'proxy CPU us/request, user + system: medians':
            name === 'direct' ? '-' : splitCell(rounds(r), (i) => rounds(r)[i]!.requests),
          'event-loop delay p99 / max ms: median (by round)': loopCell(rounds(r)),
          'requests/s (all rounds)': f(r.rps, 0),
          errors: r.timeouts === 0 ? String(r.errors) : `${r.errors} (${r.timeouts} wrk 2 s timeouts)`,
          'p50 / p99 ms': `${f(r.p50, 2)} / ${f(r.p99, 2)}`,
          'added p50 / p99 ms': name === 'direct' ? '-' : `${f(r.p50 - d.p50, 2)} / ${f(r.p99 - d.p99, 2)}`,
          'proxy CPU ms/request': r.cpuMs === undefined ? '-' : f(r.cpuMs / r.requests, 4),
          'vs direct (median req/s)': ratio(medianRps(r), medianRps(d)),
          'vs nginx (median req/s)': ratio(medianRps(r), medianRps(results.nginx)),
          'vs sglang-router (median req/s)': ratio(medianRps(r), medianRps(results['sglang-router'])),
        },
      };
    });
    printTable(
      `(b) ceiling: non-streaming /generate, ${args['ceiling-concurrency']} clients, zero modelled latency, ${engines.urls.length} ${engineKind} engine(s)`,
      Object.keys((cols[0] as { cells: Record<string, string> }).cells),
      cols,
      [
        'load generator: ' + ('bin' in wrk ? 'wrk -t1 (Lua POST script)' : `node (${wrk.missing})`),
        `${args.rounds} rounds per column in rotated order`,
        "targets (issue 28): gateway >= 1.3x sglang-router and >= 0.7x nginx requests/s, added p99 <= the router's, CPU per request <= 2x nginx; event-loop delay within 2x the node relay's",
        'node relay: calibration, not a product (bench/node-relay.ts): the answer collected to its length and sent in one write',
        ROUTER_NOTE,
      ],
    );
    if (args.strace !== undefined)
      await printSyscalls(
        [
          { name: 'nginx', proxy: proxyNginx, path: `/${ROLE}/generate` },
          { name: 'node relay', proxy: nodeRelay, path: '/generate' },
          { name: 'raw relay', proxy: rawRelay, path: '/generate' },
          { name: 'tcp relay', proxy: tcpRelay, path: '/generate' },
          { name: 'gateway', proxy: gateway, path: `/${ROLE}/generate` },
          ...variants.map(({ name, proxy }) => ({ name, proxy, path: `/${ROLE}/generate` })),
        ],
        body,
      );
  } finally {
    await stopAll();
  }
}

/** Syscalls per request of each proxy under the ceiling's load (`--strace S`), one wrk window each. */
async function printSyscalls(
  columns: Array<{ name: string; proxy: Proxy | undefined; path: string }>,
  body: string,
): Promise<void> {
  const strace = findStrace();
  if ('missing' in strace) {
    console.log(`\n- syscalls not counted: ${strace.missing}`);
    return;
  }
  const script = wrkScript(body);
  const counted: Array<{ name: string; counts: SyscallCounts & { requests: number } }> = [];
  for (const { name, proxy, path } of columns) {
    if (proxy === undefined) continue;
    const counts = await syscallsDuring(
      proxy.proc.pid,
      async () =>
        (
          await runWrk(
            `${proxy.url}${path}`,
            Number(args['ceiling-concurrency']),
            Number(args.strace),
            script,
          )
        ).requests,
    );
    counted.push({ name, counts });
  }
  // Rows: the total and every syscall that is among some column's six most frequent.
  const top = new Set(
    counted.flatMap(({ counts }) =>
      Object.entries(counts.calls)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(([k]) => k),
    ),
  );
  const per = (c: SyscallCounts & { requests: number }, n: number | undefined) =>
    f((n ?? 0) / Math.max(1, c.requests), 2);
  const cols: Column[] = counted.map(({ name, counts }) => ({
    name,
    cells: {
      'requests in the window': String(counts.requests),
      'syscalls/request': per(counts, counts.total),
      ...Object.fromEntries([...top].map((k) => [`${k}/request`, per(counts, counts.calls[k])])),
    },
  }));
  if (cols.length === 0) return;
  printTable(
    `syscalls per request under the ceiling's load (strace -f -c, ${args.strace} s of wrk per column)`,
    Object.keys((cols[0] as { cells: Record<string, string> }).cells),
    cols,
    [
      'strace slows the traced process several times: its request rate here means nothing, and a slower process batches more per wakeup (epoll_wait per request reads low); calls per write/read are what this is for',
    ],
  );
}

async function main(): Promise<void> {
  if (args.nice !== undefined) setPriority(Number(args.nice));
  const nginx = args['no-nginx'] ? { missing: '--no-nginx' } : findNginx();
  console.log(
    `gateway bench: engines=${engineKind}, ${durationS}s (+${warmupS}s warmup) per column and round, ` +
      `${cpus().length} CPUs, nice ${getPriority()}, load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} at start (the machine is shared: run twice)`,
  );
  const router = args['no-router'] ? { missing: '--no-router' } : findRouter();
  if (args.only !== 'ceiling') await realistic(nginx, router);
  if (args.only !== 'realistic') await ceiling(nginx, router);
  printProfiles();
  if (diagnostics.length > 0) console.log(`\n${diagnostics.map((d) => `- ${d}`).join('\n')}`);
}

const cleanup = () => {
  void stopAll().then(() => process.exit(130));
};
process.on('SIGINT', cleanup);
process.on('SIGTERM', cleanup);
// A failure outside main's promise chain (e.g. in a diagnostics callback) must not leave engines and proxies
// running: they are detached process groups that outlive this process.
const fatal = (e: unknown) => {
  console.error(e);
  void stopAll().then(() => process.exit(1));
};
process.on('uncaughtException', fatal);
process.on('unhandledRejection', fatal);
main()
  .catch(async (e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => stopAll());
