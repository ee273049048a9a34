// Plan + validate a 4,096-GPU cluster (512 nodes x 8) with 64 models across three roles, next to the cost of merely
// parsing the same config (YAML + schema). Targets: plan < 5x parse and < 20 ms (median). The same layout with every
// model sized (the memory model: residency per phase and GPU, switch predictions, the defer order search) is timed
// beside it: < 20 ms, and its ratio to the unsized plan is printed.
import { performance } from 'node:perf_hooks';
import { deferPhases, loadConfig } from '@uis/spec';
import { stringify } from 'yaml';
import { type BundleProbeEntry, planPlacement, validateBundleProbe } from '../src/index.ts';

const NODES = 512;
const PER_NODE = 8;

function model(name: string, weight_source: string, gpus: number, gpe: number) {
  return {
    name,
    model_path: `/models/${name}`,
    weight_source,
    engine_groups: [{ num_gpus: gpus, gpus_per_engine: gpe }],
  };
}

// 32 rollout models (64 GPUs, tp2) split the 2,048-GPU actor pool; 16 GenRM models (128 GPUs, tp8) are deferred on
// the same bundles; 16 teacher models (128 GPUs, tp16 over two nodes) get their own 2,048-GPU pool.
const doc = {
  cluster: {
    nodes: Array.from({ length: NODES }, (_, i) => ({
      name: `node-${i}`,
      gpus: PER_NODE,
      ip: `10.0.${i >> 8}.${i & 255}`,
    })),
  },
  training: { actor_gpus: 2048, offload_train: true },
  roles: {
    rollout: {
      deployment: { mode: 'colocated_split', offload: true },
      routing: { default_model: 'r0' },
      models: Array.from({ length: 32 }, (_, i) => model(`r${i}`, 'tensor', 64, 2)),
    },
    genrm: {
      deployment: { mode: 'colocated_defer', offload: true },
      routing: { default_model: 'g0' },
      models: Array.from({ length: 16 }, (_, i) => model(`g${i}`, 'static', 128, 8)),
    },
    teacher: {
      deployment: { mode: 'decoupled' },
      routing: { default_model: 't0' },
      models: Array.from({ length: 16 }, (_, i) => model(`t${i}`, 'static', 128, 16)),
    },
  },
  schedule: {
    activation_groups: [
      {
        name: 'actor',
        phases: deferPhases(['genrm']),
      },
    ],
  },
};
const text = stringify(doc);
const config = loadConfig(text, 'bench.yaml');
const sizes = { r: 8.2e9, g: 32.8e9, t: 72.7e9 } as const;
const sizedDoc = structuredClone(doc);
for (const role of Object.values(sizedDoc.roles))
  for (const m of role.models)
    Object.assign(m, { memory: { parameters: sizes[m.name[0] as keyof typeof sizes], kv_cache_share: 0.2 } });
Object.assign(sizedDoc.training, { memory_share: 0.4 });
const sizedConfig = loadConfig(stringify(sizedDoc), 'bench-sized.yaml');
const sizedFirst = planPlacement(sizedConfig);
if (!sizedFirst.ok || (sizedFirst.plan.memory?.[0]?.unsized.length ?? 1) > 0)
  throw new Error(
    `sized bench layout: ${JSON.stringify(sizedFirst.ok ? sizedFirst.plan.memory : sizedFirst.errors.slice(0, 3))}`,
  );
const first = planPlacement(config);
if (!first.ok) throw new Error(`bench layout is invalid: ${JSON.stringify(first.errors.slice(0, 3))}`);
const probe: BundleProbeEntry[] = (first.plan.pools.actor?.bundles ?? []).map((b) => ({
  bundle_index: b.index,
  node_id: `ray-${b.node}`,
  gpu_id: b.gpu_id,
}));
const engines = first.plan.placements.reduce((s, p) => s + p.replicas.length, 0);

function median(fn: () => void, runs: number): number {
  for (let i = 0; i < 10; i++) fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? Number.NaN;
}

const RUNS = 60;
const parse = median(() => loadConfig(text, 'bench.yaml'), RUNS);
const plan = median(() => {
  const r = planPlacement(config);
  if (!r.ok || validateBundleProbe(r.plan, 'actor', probe).length > 0)
    throw new Error('unexpected violation');
}, RUNS);

const sized = median(() => {
  const r = planPlacement(sizedConfig);
  if (!r.ok || (r.plan.memory?.[0]?.configured.switches.length ?? 0) === 0)
    throw new Error('unexpected violation');
}, RUNS);

const rows = [
  ['parse config (YAML + schema)', parse],
  ['plan + validate probe', plan],
  ['plan with the memory model (every model sized)', sized],
] as const;
console.log(
  `cluster: ${NODES} nodes x ${PER_NODE} GPUs = ${NODES * PER_NODE} GPUs, 64 models, ${engines} engines, config ${(text.length / 1024).toFixed(0)} KiB, median of ${RUNS}`,
);
console.table(rows.map(([name, ms]) => ({ step: name, 'median ms': Number(ms.toFixed(2)) })));
const ratio = plan / parse;
const verdict = ratio < 5 && plan < 20 ? 'PASS' : 'FAIL';
console.log(
  `plan / parse = ${ratio.toFixed(2)}x (target < 5x), plan = ${plan.toFixed(2)} ms (target < 20 ms): ${verdict}`,
);
const memVerdict = sized < 20 ? 'PASS' : 'FAIL';
console.log(
  `plan with memory model = ${sized.toFixed(2)} ms (target < 20 ms), ${(sized / plan).toFixed(2)}x the plan without sizes: ${memVerdict}`,
);
