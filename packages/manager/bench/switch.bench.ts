/**
 * The fleet weight switch at 64 engines: time from the command to the whole model on the new version (every
 * replica updated, read back, continued and the topology published), as a ratio to the slowest single engine's
 * update in the same switch (the floor: engines update in parallel). One row per mode; target <= 1.1. Each engine's
 * update takes a modelled 100-200 ms (sim `--sim-onload-ms`, different per engine). `update_weights` (the per-replica
 * update without a pause or a barrier) is printed beside it as the reference.
 */

import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { InferenceRoleSpec } from '@uis/spec';
import { ExternalLauncher, InferenceManager, type WeightSwitchMode } from '../src/index.ts';
import { planConfig } from '../src/testing.ts';
import { startSimHost } from './sim-host-process.ts';

const ENGINES = Number(process.env.BENCH_ENGINES ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const WARMUP = 2;
const onloadMs = (k: number) => 100 + ((k * 37) % 11) * 10;

const { plan, roles } = planConfig({
  cluster: {
    nodes: Array.from({ length: Math.ceil(ENGINES / 8) }, (_, i) => ({ name: `node-${i}`, gpus: 8 })),
  },
  roles: {
    rollout: {
      deployment: { mode: 'decoupled' },
      models: [
        {
          name: 'policy',
          model_path: '/models/policy',
          weight_source: 'disk',
          engine_groups: [{ num_gpus: ENGINES, gpus_per_engine: 1 }],
        },
      ],
    },
  },
});
const replicas = plan.placements.flatMap((p) => p.replicas);
const host = await startSimHost(
  replicas.map((r, k) => ({
    key: r.engine_id,
    modelPath: '/models/policy',
    servedModelName: 'policy',
    simOnloadMs: onloadMs(k),
  })),
);
const manager = new InferenceManager({
  role: roles.rollout as InferenceRoleSpec,
  placements: plan.placements,
  launcher: new ExternalLauncher((req) => host.urls[req.replica.engine_id], 5),
  options: { healthIntervalMs: 3_600_000 },
});
await manager.start();

let version = 0;
const update = () => ({
  source: 'disk' as const,
  model_path: '/models/policy',
  weight_version: `v${++version}`,
});
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function measure(name: string, run: () => Promise<number>) {
  const ratios: number[] = [];
  const totals: number[] = [];
  const slowest: number[] = [];
  for (let round = 0; round < ROUNDS + WARMUP; round++) {
    const t0 = performance.now();
    const floor = await run();
    const total = performance.now() - t0;
    if (round < WARMUP) continue;
    totals.push(total);
    slowest.push(floor);
    ratios.push(total / floor);
  }
  return {
    name,
    total: median(totals),
    slowest: median(slowest),
    ratio: median(ratios),
    worst: Math.max(...ratios),
  };
}

const rows = [];
for (const mode of ['drain', 'pause_in_place', 'abort'] as WeightSwitchMode[])
  rows.push(
    await measure(mode, async () => {
      const rec = await manager.switchWeights('policy', { mode, update: update() });
      if (rec.outcome !== 'switched') throw new Error(`switch ${rec.outcome}`);
      return rec.slowest_update_ms;
    }),
  );
const reference = await measure('update_weights (reference: no pause, no barrier)', async () => {
  // The slowest engine's update is timed by the same clock as the switch's (the manager's audit keeps it); here
  // it is the modelled floor plus one read-back, so the slowest modelled load stands in for it.
  await manager.updateWeights('policy', update());
  return Math.max(...replicas.map((_, k) => onloadMs(k)));
});
await manager.shutdown();
await host.stop();

const fmt = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
console.log(
  `\nload average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} on ${cpus().length} CPUs`,
);
console.log(
  `weight switch of ${ENGINES} engines, each update modelled at 100-200 ms; median of ${ROUNDS} rounds`,
);
console.log(
  '| mode | command to whole model on new version, ms | slowest engine update, ms | ratio (median) | ratio (worst) | target |',
);
console.log('|---|---|---|---|---|---|');
for (const r of rows)
  console.log(
    `| ${r.name} | ${fmt(r.total)} | ${fmt(r.slowest)} | ${r.ratio.toFixed(3)} | ${r.worst.toFixed(3)} | ratio <= 1.1: ${r.ratio <= 1.1 ? 'PASS' : 'FAIL'} |`,
  );
console.log(
  `| ${reference.name} | ${fmt(reference.total)} | ${fmt(reference.slowest)} (modelled) | ${reference.ratio.toFixed(3)} | ${reference.worst.toFixed(3)} | - |`,
);
