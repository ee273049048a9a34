/**
 * Control-plane cost of one defer transition (rollout -> genrm_score: drain + flush + release every rollout
 * engine, prove the release, onload every GenRM engine by tags, publish) with 64 simulated engines per side.
 *
 * 1. Zero modelled memory latency: the transition time is pure control plane (HTTP calls, state machine,
 *    publication, audit log). Target < 50 ms.
 * 2. Modelled latency (sim offload 100-200 ms, onload 100-150 ms per resume call, different per engine): the
 *    critical path of one transition is the slowest release followed by the slowest onload (one resume call:
 *    the static GenRM has no weights to sync), because no scorer may onload before every rollout engine released.
 *    Ratio = transition time / that critical path. Target <= 1.1 (engines in parallel, not one after another).
 *    A sequential baseline (the same engine calls one engine after another) is printed beside it: measured in
 *    the zero-latency run, computed (sum of modelled latencies) in the modelled one.
 */

import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { deferPhases, type InferenceRoleSpec } from '@uis/spec';
import {
  EventLog,
  ExternalLauncher,
  InferenceManager,
  LifecycleCoordinator,
  openStore,
} from '../src/index.ts';
import { planConfig } from '../src/testing.ts';
import { startSimHost } from './sim-host-process.ts';

const ENGINES = Number(process.env.BENCH_ENGINES ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const WARMUP = 5;

function config(n: number) {
  const nodes = Math.ceil(n / 8);
  const group = [{ num_gpus: n, gpus_per_engine: 1 }];
  return {
    cluster: { nodes: Array.from({ length: nodes }, (_, i) => ({ name: `node-${i}`, gpus: 8 })) },
    training: { actor_gpus: n, offload_train: true },
    roles: {
      rollout: {
        deployment: { mode: 'colocated_split', offload: true },
        models: [
          { name: 'policy', model_path: '/models/policy', weight_source: 'disk', engine_groups: group },
        ],
      },
      genrm: {
        deployment: { mode: 'colocated_defer', offload: true },
        models: [
          { name: 'judge', model_path: '/models/judge', weight_source: 'static', engine_groups: group },
        ],
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
}

interface Latency {
  offloadMs: (i: number) => number;
  onloadMs: (i: number) => number;
}

async function scenario(name: string, n: number, latency: Latency | null) {
  const { plan, roles } = planConfig(config(n));
  const specs: Array<Record<string, unknown>> = [];
  let i = 0;
  for (const role of ['rollout', 'genrm'] as const) {
    for (const p of plan.placements.filter((x) => x.role === role)) {
      for (const r of p.replicas) {
        const k = i++;
        specs.push({
          key: `${role}:${r.engine_id}`,
          modelPath: `/models/${p.model}`,
          servedModelName: p.model,
          enableMemorySaver: true,
          simOffloadMs: latency?.offloadMs(k) ?? 0,
          simOnloadMs: latency?.onloadMs(k) ?? 0,
        });
      }
    }
  }
  const host = await startSimHost(specs);
  const sims = host.urls;
  const db = openStore();
  const events = new EventLog(db);
  const launcher = new ExternalLauncher((req) => sims[`${req.role}:${req.replica.engine_id}`], 5);
  const managers = (['rollout', 'genrm'] as const).map(
    (role) =>
      new InferenceManager({
        role: roles[role] as InferenceRoleSpec,
        placements: plan.placements,
        launcher,
        events,
        options: { healthIntervalMs: 3_600_000 },
      }),
  );
  await Promise.all(managers.map((m) => m.start()));
  const coordinator = new LifecycleCoordinator({
    groups: plan.activation_groups,
    participants: managers,
    db,
    events,
    registries: managers.map((m) => m.registry),
    autoAdvance: () => false,
  });
  await coordinator.initialize();
  const times: number[] = [];
  const cpu: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const r = await coordinator.transition({ to: 'genrm_score' });
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
    if (process.env.BENCH_DEBUG)
      console.log(name, r.steps.map((x) => `${x.step}=${x.duration_ms}`).join(' '), performance.now() - t0);
    await coordinator.transition({ to: 'train' });
    await coordinator.transition({ to: 'rollout' });
  }
  // The first rounds warm connection pools and the JIT; report the median and the best of the rest.
  const steady = times.slice(WARMUP).sort((a, b) => a - b);
  const median = steady[Math.floor(steady.length / 2)] ?? Number.NaN;
  const cpuSteady = cpu.slice(WARMUP).sort((a, b) => a - b);
  const cpuMedian = cpuSteady[Math.floor(cpuSteady.length / 2)] ?? Number.NaN;
  let criticalPath = 0;
  let sequential = 0;
  if (latency) {
    const off = [...Array(n).keys()].map((k) => latency.offloadMs(k));
    const on = [...Array(n).keys()].map((k) => latency.onloadMs(n + k));
    // GenRM is static: nothing to sync, so its engines resume every tag in one call.
    criticalPath = Math.max(...off) + Math.max(...on);
    sequential = off.reduce((a, b) => a + b, 0) + on.reduce((a, b) => a + b, 0);
  } else {
    // Measured baseline: the same engine calls (drain + release each rollout engine, resume each GenRM engine)
    // issued one engine after another, without the manager, the lease or publication. The lease is at
    // `rollout` here: rollout engines are resident, GenRM engines asleep.
    const [rolloutManager, genrmManager] = managers as [InferenceManager, InferenceManager];
    const outgoing = rolloutManager.eligibleEngines('policy').map((e) => e.engine);
    const incoming = (genrmManager.snapshot().models.judge?.replicas ?? []).map((r) =>
      genrmManager.engine(r.engine_id),
    );
    const t0 = performance.now();
    for (const e of outgoing) {
      await e.drain({ policy: 'wait', deadlineMs: 10_000 });
      await e.client.releaseMemoryOccupation();
    }
    for (const e of incoming) await e?.wake();
    sequential = performance.now() - t0;
  }
  await Promise.all(managers.map((m) => m.shutdown()));
  await host.stop();
  db.close();
  return { name, n, median, best: steady[0] ?? Number.NaN, cpuMedian, criticalPath, sequential };
}

const jitter = (base: number, span: number) => (k: number) => base + ((k * 37) % 11) * (span / 10);

const rows: Array<Awaited<ReturnType<typeof scenario>>> = [
  await scenario('zero modelled latency', ENGINES, null),
  await scenario('modelled latency', ENGINES, { offloadMs: jitter(100, 100), onloadMs: jitter(100, 50) }),
];

const fmt = (x: number) => (Number.isFinite(x) && x > 0 ? x.toFixed(1) : '-');
console.log(
  `\nload average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} on ${cpus().length} CPUs`,
);
console.log(
  `defer transition rollout -> genrm_score, ${ENGINES} rollout engines offloaded + ${ENGINES} GenRM engines onloaded`,
);
console.log(
  '| scenario | engines/side | transition median ms | best ms | manager CPU ms (median) | critical path ms | ratio | sequential baseline ms | target |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const ratio = r.criticalPath > 0 ? r.median / r.criticalPath : Number.NaN;
  const target =
    r.criticalPath > 0
      ? `ratio <= 1.1: ${ratio <= 1.1 ? 'PASS' : 'FAIL'}`
      : `< 50 ms: ${r.median < 50 ? 'PASS' : 'FAIL'}`;
  console.log(
    `| ${r.name} | ${r.n} | ${fmt(r.median)} | ${fmt(r.best)} | ${fmt(r.cpuMedian)} | ${fmt(r.criticalPath)} | ${Number.isFinite(ratio) ? ratio.toFixed(3) : '-'} | ${fmt(r.sequential)} | ${target} |`,
  );
}
