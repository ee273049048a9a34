/**
 * Reads a gateway process's V8 CPU profile (`node --cpu-prof`, written when it stops) and says where its main
 * thread's time went: a per-request breakdown of the serving path by part (parse, route, upstream write, answer
 * relay, metrics, time series, audit/log, GC, node's HTTP server) and the event-loop stall sources (runs of timer,
 * immediate or GC work longer than 1 ms: periodic work every request behind it waits for).
 *
 * A sample belongs to the innermost frame of the project on its stack (node internals count for the project code
 * that called them: the socket write under an exchange's relay is relay); samples with no project frame are named
 * by their innermost node frame.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The parts of the serving path, in the order printed. */
export const PARTS = [
  'parse (body read, JSON checks)',
  'route (resolve, pick, breakers, admission, in-flight)',
  'upstream write (body edit, headers, engine pool)',
  'answer relay (engine read, client write)',
  'completion (circuit, served hooks)',
  'metrics (prom-client)',
  'time series (ring, console journal)',
  'audit / log / tracing',
  'node HTTP server (parser, socket, no project frame)',
  'GC',
  'other',
] as const;
export type Part = (typeof PARTS)[number];

const UPSTREAM_FNS =
  /^(begin|admitted|#attempt|#hold|#dispatch|dispatch|onRequestStart|upstreamRequestHeaders|forwardedBody|spliceRid|nextId|write.*Request|#send.*|send.*)$/;
const COMPLETION_FNS = /^(#finish|completed|judge|judgeReplica|release|leave|success|settle)$/;

/** The part of one project frame, or undefined when the file is not one the serving path runs. */
function projectPart(f: CallFrame): Part | undefined {
  const u = f.url;
  const fn = f.functionName;
  if (u.includes('/node_modules/prom-client/') || u.includes('/metrics/gateway-metrics.ts'))
    return 'metrics (prom-client)';
  if (u.includes('/node_modules/pino') || u.includes('/tracing/') || u.includes('/access-log.ts'))
    return 'audit / log / tracing';
  if (!u.includes('/apps/gateway/src/') && !u.includes('/packages/')) return undefined;
  if (
    u.includes('/time-series-ring.ts') ||
    u.includes('/observability.ts') ||
    u.includes('/console-journal.ts') ||
    u.includes('/health-history')
  )
    return 'time series (ring, console journal)';
  if (
    u.includes('/proxy/body.ts') ||
    u.includes('/json-scan.ts') ||
    u.includes('/json-depth.ts') ||
    u.includes('/proxy/forward.ts')
  )
    return 'parse (body read, JSON checks)';
  if (u.includes('/served-requests.ts')) return 'completion (circuit, served hooks)';
  if (u.includes('/proxy/exchange.ts')) {
    if (UPSTREAM_FNS.test(fn)) return 'upstream write (body edit, headers, engine pool)';
    if (COMPLETION_FNS.test(fn)) return 'completion (circuit, served hooks)';
    return 'answer relay (engine read, client write)';
  }
  if (u.includes('/proxy/headers.ts'))
    return fn === 'upstreamRequestHeaders'
      ? 'upstream write (body edit, headers, engine pool)'
      : 'answer relay (engine read, client write)';
  if (u.includes('/proxy/upstream/') || u.includes('/upstream-pools.ts') || u.includes('/request-id.ts')) {
    // The engine pool both writes requests and parses answers: by function.
    return /^(on|#on|parse|#parse|#read|read|execute|#head|#body|#chunk)/.test(fn) || fn === ''
      ? 'answer relay (engine read, client write)'
      : 'upstream write (body edit, headers, engine pool)';
  }
  if (u.includes('/usage.ts') || u.includes('/relay-util.ts'))
    return 'answer relay (engine read, client write)';
  if (u.includes('/replica-breakers.ts') && COMPLETION_FNS.test(fn))
    return 'completion (circuit, served hooks)';
  if (u.includes('/in-flight.ts') && fn === 'release') return 'completion (circuit, served hooks)';
  if (
    u.includes('/inference-gateway.ts') ||
    u.includes('/packages/routing/') ||
    u.includes('/packages/manager/') ||
    u.includes('/replica-breakers.ts') ||
    u.includes('/admission.ts') ||
    u.includes('/in-flight.ts') ||
    u.includes('/fast-routes.ts') ||
    u.includes('/uis-server.ts') ||
    u.includes('/request-guard.ts')
  )
    return 'route (resolve, pick, breakers, admission, in-flight)';
  return undefined;
}

/** Samples with no project frame: GC, or node's own HTTP server work (parsing, accepting, socket callbacks). */
function nodePart(leaf: CallFrame): Part {
  if (leaf.functionName === '(garbage collector)') return 'GC';
  if (leaf.url.startsWith('node:') || leaf.functionName === '(program)' || leaf.url === '')
    return 'node HTTP server (parser, socket, no project frame)';
  return 'other';
}

const TIMER_ROOTS = new Set(['processTimers', 'listOnTimeout', 'processImmediate']);

/** The name of a run of periodic work: the callback under the timer machinery, or GC. */
function stallName(stack: CallFrame[]): string | undefined {
  const leaf = stack[0]!;
  if (leaf.functionName === '(garbage collector)') return 'GC';
  for (let i = stack.length - 1; i >= 0; i--) {
    if (TIMER_ROOTS.has(stack[i]!.functionName)) {
      const cb = stack[i - 1] ?? stack[i]!;
      // Skip the timer machinery itself to the first callback frame.
      for (let j = i - 1; j >= 0; j--) {
        const c = stack[j]!;
        if (!TIMER_ROOTS.has(c.functionName)) {
          const file = c.url.split('/').slice(-2).join('/');
          return `timer: ${c.functionName || '(anonymous)'} ${file}:${c.lineNumber + 1}`;
        }
      }
      return `timer: ${cb.functionName}`;
    }
  }
  return undefined;
}

export interface ProfileSummary {
  /** Main-thread busy time in the profile (ms), idle excluded; each sample counts at most twice the sampling
   * interval (a thread waiting for a core is not busy). */
  busyMs: number;
  /** Busy time per part (ms). */
  parts: Map<Part, number>;
  /** Self time per function (ms), the top ones. */
  top: Array<{ name: string; ms: number }>;
  /** Stall sources: runs of one kind of periodic work, count and longest (ms). */
  stalls: Array<{ name: string; runs: number; over1ms: number; maxMs: number; totalMs: number }>;
}

/** `fromUs`: samples before this time (the monotonic clock, microseconds) are left out: the process's startup. */
export function summarizeProfile(file: string, fromUs = 0): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  // Per node: its stack (leaf first), part and stall name, computed once.
  const memo = new Map<number, { part: Part | 'idle'; stall: string | undefined; self: string }>();
  const classify = (id: number) => {
    let m = memo.get(id);
    if (m !== undefined) return m;
    const stack: CallFrame[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at))
      stack.push(byId.get(at)!.callFrame);
    const leaf = stack[0]!;
    let part: Part | 'idle' | undefined;
    if (leaf.functionName === '(idle)') part = 'idle';
    else
      for (const f of stack) {
        part = projectPart(f);
        if (part !== undefined) break;
      }
    part ??= nodePart(leaf);
    const file = leaf.url.split('/').slice(-2).join('/');
    m = { part, stall: stallName(stack), self: `${leaf.functionName || '(anonymous)'} ${file}` };
    memo.set(id, m);
    return m;
  };
  const parts = new Map<Part, number>();
  const self = new Map<string, number>();
  const stalls = new Map<string, { runs: number; over1ms: number; maxMs: number; totalMs: number }>();
  let busyUs = 0;
  let run: { name: string; us: number } | undefined;
  const closeRun = () => {
    if (run === undefined) return;
    const s = stalls.get(run.name) ?? { runs: 0, over1ms: 0, maxMs: 0, totalMs: 0 };
    s.runs++;
    if (run.us > 1000) s.over1ms++;
    s.maxMs = Math.max(s.maxMs, run.us / 1000);
    s.totalMs += run.us / 1000;
    stalls.set(run.name, s);
    run = undefined;
  };
  // A thread the kernel took off its core is sampled once it runs again, with the whole gap as that sample's
  // time: on a loaded machine that would charge preemption to whatever ran then. Each sample counts for at most
  // twice the usual interval (the time on the CPU, roughly), so stall runs are work, not waiting for a core.
  const deltas = p.timeDeltas.filter((_, i) => i % 97 === 0).sort((a, b) => a - b);
  const cap = 2 * (deltas[deltas.length >> 1] ?? 1000);
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    at += p.timeDeltas[i] ?? 0;
    if (at < fromUs) continue;
    // A sample's time is the delta to the next sample (V8 records the delta before each sample).
    const us = Math.min(cap, p.timeDeltas[i + 1] ?? 0);
    const c = classify(p.samples[i]!);
    if (c.part === 'idle') {
      closeRun();
      continue;
    }
    busyUs += us;
    parts.set(c.part, (parts.get(c.part) ?? 0) + us / 1000);
    self.set(c.self, (self.get(c.self) ?? 0) + us / 1000);
    if (c.stall !== undefined && run?.name === c.stall) run.us += us;
    else {
      closeRun();
      if (c.stall !== undefined) run = { name: c.stall, us };
    }
  }
  closeRun();
  return {
    busyMs: busyUs / 1000,
    parts,
    top: [...self]
      .map(([name, ms]) => ({ name, ms }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 12),
    stalls: [...stalls]
      .map(([name, s]) => ({ name, ...s }))
      .sort((a, b) => b.maxMs - a.maxMs)
      .slice(0, 8),
  };
}

/** The main thread's profile a process with `pid` wrote into `dir` (node names it CPU.<date>.<time>.<pid>.<tid>.<seq>). */
export function profileOf(dir: string, pid: number): string | undefined {
  // Thread 0 is the main thread (the others are loader threads).
  const name = readdirSync(dir).find((f) => {
    const parts = f.split('.');
    return f.endsWith('.cpuprofile') && parts[3] === String(pid) && parts[4] === '0';
  });
  return name === undefined ? undefined : join(dir, name);
}

/** The printed breakdown of one column: each part's share of the busy time and, scaled by the CPU per request
 * the bench measured for that column, its microseconds per request. */
export function profileLines(
  column: string,
  s: ProfileSummary,
  cpuUsPerRequest: number | undefined,
  unit = 'request',
): string[] {
  const f = (v: number, d = 1) => v.toFixed(d);
  const lines = [
    `${column}: main thread busy ${f(s.busyMs / 1000, 2)} s in the profile` +
      (cpuUsPerRequest === undefined ? '' : `; measured CPU ${f(cpuUsPerRequest)} us/${unit} (all threads)`),
    '',
    `| part | share of busy | us/${unit} |`,
    '|---|---|---|',
  ];
  for (const part of PARTS) {
    const ms = s.parts.get(part) ?? 0;
    const share = s.busyMs === 0 ? 0 : ms / s.busyMs;
    lines.push(
      `| ${part} | ${f(share * 100)} % | ${cpuUsPerRequest === undefined ? '-' : f(share * cpuUsPerRequest)} |`,
    );
  }
  lines.push('', `top self time: ${s.top.map((t) => `${t.name} ${f(t.ms, 0)} ms`).join('; ')}`);
  lines.push(
    `event-loop stall sources (runs of timer/immediate/GC work): ${
      s.stalls.length === 0
        ? 'none'
        : s.stalls
            .map((t) => `${t.name}: ${t.runs} runs, ${t.over1ms} over 1 ms, max ${f(t.maxMs, 2)} ms`)
            .join('; ')
    }`,
  );
  return lines;
}
