/** Routing decisions per second per policy at 8, 128 and 1,024 replicas, µs per decision, and the memory the
 * cache-aware tree holds per replica. Baseline in the same run: a naive round robin that filters the engine list
 * on every request (what the cached candidate lists avoid). Run: `pnpm bench` (add --expose-gc for memory). */
import { type DiscoveryModel, type DiscoverySnapshot, type ReplicaPolicy, UisError } from '@uis/spec';
import { ReplicaSelector, type ResolvedModel, resolveModel } from '../src/index.ts';

const SIZES = [8, 128, 1024];

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 0x100000000;
  };
}

const WORDS =
  'the of and to a in is that for it as with was on be by this are or from at an which but not have'.split(
    ' ',
  );
function text(rand: () => number, chars: number): string {
  let out = '';
  while (out.length < chars) out += `${WORDS[Math.floor(rand() * WORDS.length)]} `;
  return out.slice(0, chars);
}

function snapshotOf(n: number, policy: ReplicaPolicy): DiscoverySnapshot {
  const entry: DiscoveryModel = {
    state: 'ready',
    router_url: null,
    engines: Array.from({ length: n }, (_, i) => ({
      engine_id: `m/${i}`,
      base_url: `http://10.${(i >> 8) & 255}.${i & 255}.1:15000`,
      state: 'ready' as const,
      direct_eligible: true,
      weight_version: String(i % 3),
    })),
  };
  return {
    role: 'rollout',
    topology_revision: 1,
    registry_epoch: 'bench',
    phase: null,
    models: { m: entry },
    routing: { default_model: 'm', route_keys: {}, aliases: {}, policy, model_policies: {} },
  };
}

function resolved(snap: DiscoverySnapshot): ResolvedModel {
  const r = resolveModel(snap, {});
  if (r instanceof UisError) throw r;
  return r;
}

/** Runs `fn` for at least `minMs` after a warm-up; returns µs per call. */
function measure(fn: (i: number) => void, minMs = 400, warmUp = 2000): number {
  for (let i = 0; i < warmUp; i++) fn(i);
  let calls = 0;
  const start = performance.now();
  let elapsed = 0;
  const chunk = Math.min(1000, Math.max(10, warmUp));
  while (elapsed < minMs) {
    for (let i = 0; i < chunk; i++) fn(calls + i);
    calls += chunk;
    elapsed = performance.now() - start;
  }
  return (elapsed * 1000) / calls;
}

interface Row {
  policy: string;
  replicas: number;
  us: number;
}
const rows: Row[] = [];
let sink = 0;

for (const n of SIZES) {
  // Baseline: filter the engine list per request, then modulo.
  {
    const snap = snapshotOf(n, 'round_robin');
    let rr = 0;
    rows.push({
      policy: 'baseline: naive round robin',
      replicas: n,
      us: measure(() => {
        const c = snap.models.m!.engines.filter(
          (e) => e.state === 'ready' && e.direct_eligible && e.base_url,
        );
        sink += c[rr++ % c.length]!.engine_id.length;
      }),
    });
  }
  // Keyed requests (X-SMG-Routing-Key, Relax's rule: one SHA-256 per replica): a key seen for the first time,
  // and a key that repeats (a GRPO group's samples, a multi-turn session), whose winner is remembered per model and
  // topology. The model's policy is round robin: the key decides whatever the policy.
  {
    const model = resolved(snapshotOf(n, 'round_robin'));
    const selector = new ReplicaSelector();
    let fresh = 0;
    rows.push({
      policy: 'keyed (affinity), first-time key',
      replicas: n,
      us: measure(
        () => {
          const s = selector.select(model, { affinityKey: `new-${n}-${fresh++}` });
          if (s instanceof UisError) throw s;
          sink += s.url.length;
        },
        300,
        Math.max(10, Math.floor(20_000 / n)),
      ),
    });
    const rand = lcg(n + 7);
    const keys = Array.from({ length: 4096 }, (_, i) => `group-${i}-${Math.floor(rand() * 1e9)}`);
    // Every key once first, so this row is what a repeat costs.
    for (const key of keys) selector.select(model, { affinityKey: key });
    rows.push({
      policy: 'keyed (affinity), repeated key',
      replicas: n,
      us: measure((i) => {
        const s = selector.select(model, { affinityKey: keys[i & 4095] });
        if (s instanceof UisError) throw s;
        sink += s.url.length;
      }),
    });
    // A GRPO group of 8 samples shares one key: one first-time decision, then 7 repeats.
    let group = 0;
    rows.push({
      policy: 'keyed (affinity), GRPO groups of 8',
      replicas: n,
      us: measure(
        (i) => {
          if ((i & 7) === 0) group++;
          const s = selector.select(model, { affinityKey: `grpo-${n}-${group}` });
          if (s instanceof UisError) throw s;
          sink += s.url.length;
        },
        300,
        Math.max(16, Math.floor(80_000 / n)),
      ),
    });
  }
  for (const policy of ['round_robin', 'least_outstanding'] as const) {
    const snap = snapshotOf(n, policy);
    const model = resolved(snap);
    const selector = new ReplicaSelector();
    rows.push({
      policy,
      replicas: n,
      us: measure((i) => {
        const s = selector.select(model);
        if (s instanceof UisError) throw s;
        if (policy === 'least_outstanding') {
          // Keep a realistic in-flight picture: start one, finish an older one.
          selector.acquire(s.engineId!);
          if ((i & 3) === 0) selector.release(s.engineId!);
        }
        sink += s.url.length;
      }),
    });
  }
  for (const min of [undefined, '1']) {
    const snap = snapshotOf(n, 'round_robin');
    const selector = new ReplicaSelector();
    rows.push({
      policy: min ? 'resolve + round_robin + min version' : 'resolve + round_robin',
      replicas: n,
      us: measure(() => {
        const model = resolveModel(snap, { model: 'm' });
        if (model instanceof UisError) throw model;
        const s = selector.select(model, { minWeightVersion: min });
        if (s instanceof UisError) throw s;
        sink += s.url.length;
      }),
    });
  }
}

// cache_aware on 2 KB prompts: 64 shared 1.5 KB system prompts (GRPO groups / multi-turn), 512-char tails.
function promptsFor(seed: number): string[] {
  const rand = lcg(seed);
  const heads = Array.from({ length: 64 }, () => text(rand, 1536));
  // Through JSON like a request body, so the prompts are flat strings as the gateway sees them.
  return JSON.parse(JSON.stringify(Array.from({ length: 4096 }, (_, i) => heads[i % 64]! + text(rand, 512))));
}

for (const n of SIZES) {
  const model = resolved(snapshotOf(n, 'cache_aware'));
  const prompts = promptsFor(7 + n);
  const selector = new ReplicaSelector();
  rows.push({
    policy: 'cache_aware (2 KB prompts)',
    replicas: n,
    us: measure((i) => {
      const s = selector.select(model, { prompt: prompts[i & 4095] });
      if (s instanceof UisError) throw s;
      sink += s.url.length;
    }, 1000),
  });
}

// Memory: route 4,096 distinct prompts (8 Mi chars) once, drop the prompts, collect, and count what the tree holds.
const memory: Array<{ replicas: number; chars: number; nodes: number; heap: number; coldUs: number }> = [];
const gc = (globalThis as { gc?: () => void }).gc;
// One function call per size: locals of a loop body can stay reachable from an optimized frame across iterations.
function treeMemory(n: number) {
  const model = resolved(snapshotOf(n, 'cache_aware'));
  for (let i = 0; i < 3; i++) gc?.();
  const before = process.memoryUsage().heapUsed;
  let prompts: string[] = promptsFor(11 + n);
  const selector = new ReplicaSelector();
  const t0 = performance.now();
  for (const prompt of prompts) selector.select(model, { prompt });
  const coldUs = ((performance.now() - t0) * 1000) / prompts.length;
  prompts = [];
  gc?.();
  const heap = process.memoryUsage().heapUsed - before;
  const tree = selector.treeOf('m')!;
  const chars = tree.tenants().reduce((sum, t) => sum + tree.tenantChars(t), 0);
  sink += prompts.length + tree.nodes;
  return { replicas: n, chars, nodes: tree.nodes, heap, coldUs };
}
// Warm-up run whose figures are dropped: it absorbs garbage left by the speed runs and JIT compilation.
treeMemory(8);
for (const n of SIZES) {
  // Three runs, the fastest time (a cold run is short, so one scheduling hiccup would dominate it).
  const runs = [treeMemory(n), treeMemory(n), treeMemory(n)];
  memory.push({ ...runs[2]!, coldUs: Math.min(...runs.map((r) => r.coldUs)) });
}

const header = ['policy', ...SIZES.map((n) => `${n} replicas`)];
const policies = [...new Set(rows.map((r) => r.policy))];
const fmt = (us: number) => `${us.toFixed(2)} µs (${Math.round(1e6 / us).toLocaleString('en-US')}/s)`;
const table = policies.map((p) => [
  p,
  ...SIZES.map((n) => {
    const row = rows.find((r) => r.policy === p && r.replicas === n);
    return row ? fmt(row.us) : '-';
  }),
]);
const widths = header.map((h, i) => Math.max(h.length, ...table.map((r) => r[i]!.length)));
const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
console.log('\nRouting decisions (µs per decision, decisions/s), one core, Node', process.version);
console.log(line(header));
console.log(line(widths.map((w) => '-'.repeat(w))));
for (const r of table) console.log(line(r));
console.log(
  `\ncache_aware tree memory after 4,096 distinct 2 KB prompts${gc ? '' : ' (no --expose-gc: approximate)'}`,
);
console.log(
  '| replicas | µs per decision, every prompt new | chars held (sum over replicas) | tree nodes | heap total | heap per replica | bytes per char held |',
);
console.log('|---|---|---|---|---|---|---|');
for (const m of memory) {
  console.log(
    `| ${m.replicas} | ${m.coldUs.toFixed(2)} µs | ${m.chars.toLocaleString('en-US')} | ${m.nodes.toLocaleString('en-US')} | ${(m.heap / 2 ** 20).toFixed(1)} MiB | ${(m.heap / m.replicas / 1024).toFixed(1)} KiB | ${(m.heap / m.chars).toFixed(2)} |`,
  );
}
const rr1024 = rows.find((r) => r.policy === 'round_robin' && r.replicas === 1024)!.us;
const at = (policy: string, n: number) => rows.find((r) => r.policy === policy && r.replicas === n)!.us;
for (const n of [128, 1024]) {
  const first = at('keyed (affinity), first-time key', n);
  const again = at('keyed (affinity), repeated key', n);
  console.log(
    `keyed at ${n} replicas: first-time key ${first.toFixed(2)} µs = ${(first / at('round_robin', n)).toFixed(0)} x round robin; repeated key ${again.toFixed(2)} µs = ${(again / at('round_robin', n)).toFixed(1)} x round robin`,
  );
}
const ca1024 = rows.find((r) => r.policy.startsWith('cache_aware') && r.replicas === 1024)!.us;
console.log(
  `\ntargets at 1,024 replicas: round_robin ${rr1024.toFixed(2)} µs (< 2 µs: ${rr1024 < 2 ? 'met' : 'MISSED'}), cache_aware ${ca1024.toFixed(2)} µs (< 20 µs: ${ca1024 < 20 ? 'met' : 'MISSED'})`,
);
if (sink === -1) console.log(sink);
