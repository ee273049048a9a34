/**
 * The fleet weight switch at 64 engines: time from the command to the whole model on the new version (every
 * replica updated and read back, the commit, and the new topology published: from then on every request is routed
 * to the new version), as a ratio to the slowest single engine's update measured in the same round by the same
 * client path: right after each switch, of the engines modelled slowest the one that was slowest in it updates
 * alone (the manager's own SGLangEngine, its update call and its version read back, nothing else running).
 * Engines update in parallel, so that is the floor. (Not simply the engine slowest in the switch: on a loaded
 * machine that can be a 160 ms engine held up by the fan-out, whose 160 ms alone is no floor.) One row per mode;
 * target <= 1.1. The publication is seen from outside the switch (the manager's registry, as discovery and the
 * gateway see it); beside it, the time to the command's answer, after every member was also continued (the
 * members' continue fan-out follows the publication: a request routed to a member not yet continued waits in its
 * engine's queue). Each engine's update takes a modelled 100-200 ms (sim `--sim-onload-ms`, different per engine).
 * The manager keeps its audit log in a SQLite file, as uis-server does. `update_weights` (the per-replica update
 * without a pause or a barrier) is printed beside it as the reference.
 *
 * Printed: per mode the median and every round, and where the time went: each phase's end (the last member's)
 * from the command, as the switch records it (`phases_ms`): stopped (drained + paused), loaded (update answered),
 * read back, committed, published, continued; then returned (the command's answer, after its audit record).
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { InferenceRoleSpec } from '@uis/spec';
import {
  EventLog,
  ExternalLauncher,
  InferenceManager,
  openStore,
  type WeightSwitchMode,
  type WeightSwitchRecord,
} from '../src/index.ts';
import { planConfig } from '../src/testing.ts';
import { startSimHosts } from './sim-host-process.ts';

const loadAtStart = loadavg();
const fmtLoad = (l: number[]) => l.map((x) => x.toFixed(1)).join(' ');
const ENGINES = Number(process.env.BENCH_ENGINES ?? 64);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
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
const host = await startSimHosts(
  replicas.map((r, k) => ({
    key: r.engine_id,
    modelPath: '/models/policy',
    servedModelName: 'policy',
    simOnloadMs: onloadMs(k),
  })),
  // One process by default: on 2 shared cores each more process is one more wait for the scheduler in every
  // fan-out. BENCH_SIM_PROCESSES=8 hosts them per node (each node answering on its own, as separate engines do).
  Number(process.env.BENCH_SIM_PROCESSES ?? 1),
);
const dir = mkdtempSync(join(tmpdir(), 'uis-switch-bench-'));
const db = openStore(join(dir, 'uis.db'));
const manager = new InferenceManager({
  role: roles.rollout as InferenceRoleSpec,
  placements: plan.placements,
  launcher: new ExternalLauncher((req) => host.urls[req.replica.engine_id], 5),
  events: new EventLog(db),
  store: db,
  options: { healthIntervalMs: 3_600_000 },
});
await manager.start();

let version = 0;
const update = () => ({
  source: 'disk' as const,
  model_path: '/models/policy',
  weight_version: `v${++version}`,
});

/** The engine's update alone (same SGLangEngine, same pool), to the version it is on: the ratio's floor. */
async function soloUpdate(engineId: string): Promise<number> {
  const engine = manager.engine(engineId);
  if (engine === null) throw new Error(`no engine ${engineId}`);
  const t = performance.now();
  await engine.updateWeights({
    source: 'disk',
    modelPath: '/models/policy',
    weightVersion: `v${version}`,
  });
  return performance.now() - t;
}

const PHASES = ['stopped', 'loaded', 'read_back', 'committed', 'published', 'continued'] as const;
interface Round {
  /** Command to the new topology published. */
  published: number;
  /** Command to its answer (every member continued). */
  total: number;
  solo: number;
  inSwitch: number;
  /** The longest event-loop delay in the manager process during the switch, in ms. */
  stall: number;
  phases: Record<(typeof PHASES)[number] | 'returned', number> | null;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const modelled = new Map(replicas.map((r, k) => [r.engine_id, onloadMs(k)]));
const maxModelled = Math.max(...modelled.values());
const slowestEngine = (rec: { engines: Array<{ engine_id: string; update_ms: number | null }> }) =>
  rec.engines
    .filter((e) => modelled.get(e.engine_id) === maxModelled)
    .reduce((a, b) => ((b.update_ms ?? 0) > (a.update_ms ?? 0) ? b : a)).engine_id;

type Run = () => Promise<{ slowest: string; inSwitch: number; rec?: WeightSwitchRecord }>;

/** The manager's event loop during the switch: its longest stall (64 connections' answers handled in a row). */
const loop = monitorEventLoopDelay({ resolution: 1 });
loop.enable();

/** When (performance.now) the registry first publishes the model at `target`. */
function publishedAt(target: string): { at: () => number; stop: () => void } {
  let at = Number.NaN;
  const stop = manager.registry.subscribe((snap) => {
    if (Number.isNaN(at) && snap.models.policy?.weight_version === target) at = performance.now();
  });
  return { at: () => at, stop };
}

/** One switch (or update) and the floor measured right after it. */
async function measure(run: Run): Promise<Round> {
  const seen = publishedAt(`v${version + 1}`);
  loop.reset();
  const t0 = performance.now();
  const r = await run();
  const total = performance.now() - t0;
  seen.stop();
  const published = seen.at() - t0;
  const stall = loop.max / 1e6;
  const solo = await soloUpdate(r.slowest);
  return {
    published,
    total,
    solo,
    stall,
    inSwitch: r.inSwitch,
    phases: r.rec ? { ...r.rec.phases_ms, returned: total } : null,
  };
}

const switchRun =
  (mode: WeightSwitchMode): Run =>
  async () => {
    const rec = await manager.switchWeights('policy', { mode, update: update() });
    if (rec.outcome !== 'switched') throw new Error(`switch ${rec.outcome}`);
    return { slowest: slowestEngine(rec), inSwitch: rec.slowest_update_ms, rec };
  };
const modes = (process.env.BENCH_MODES?.split(',') ?? [
  'drain',
  'pause_in_place',
  'abort',
]) as WeightSwitchMode[];
const runs: Array<{ name: string; run: Run }> = [
  ...modes.map((mode) => ({ name: mode, run: switchRun(mode) })),
  {
    name: 'update_weights (reference: no pause, no barrier)',
    run: async () => {
      // The manager's update does not time each engine: the floor is the engine modelled slowest.
      await manager.updateWeights('policy', update());
      return {
        slowest: [...modelled].find(([, ms]) => ms === maxModelled)?.[0] as string,
        inSwitch: Number.NaN,
      };
    },
  },
];
// Round-robin (each round runs every mode once), so the load other work puts on the machine meanwhile falls on
// every mode alike.
const results = runs.map(({ name }) => ({ name, rounds: [] as Round[] }));
for (let round = 0; round < ROUNDS + WARMUP; round++)
  for (const [i, { run }] of runs.entries()) {
    const r = await measure(run);
    if (round >= WARMUP) results[i]?.rounds.push(r);
  }
const loadAtEnd = loadavg();
await manager.shutdown();
await host.stop();
db.close();
rmSync(dir, { recursive: true, force: true });

const fmt = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
console.log(
  `\nload average ${fmtLoad(loadAtStart)} at the start, ${fmtLoad(loadAtEnd)} at the end, on ${cpus().length} CPUs`,
);
console.log(
  `weight switch of ${ENGINES} engines, each update modelled at 100-200 ms; median of ${ROUNDS} rounds. Floor: the` +
    ' slowest engine of the round updated alone (update + read back, same client) right after the switch.',
);
console.log(
  "Whole model on the new version = its topology published (the goal's ratio); every member continued = the command answered.",
);
console.log(
  '| mode | to whole model on new version, ms | slowest engine alone, ms | ratio (median) | ratio (worst) | to every member continued, ms | its ratio (median / worst) | slowest engine inside the switch, ms | longest event-loop stall, ms | target |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const { name, rounds } of results) {
  const ratios = rounds.map((r) => r.published / r.solo);
  const ratio = median(ratios);
  const answered = rounds.map((r) => r.total / r.solo);
  const target = name.startsWith('update_weights') ? '-' : `ratio <= 1.1: ${ratio <= 1.1 ? 'PASS' : 'FAIL'}`;
  console.log(
    `| ${name} | ${fmt(median(rounds.map((r) => r.published)))} | ${fmt(median(rounds.map((r) => r.solo)))} | ${ratio.toFixed(3)} | ${Math.max(...ratios).toFixed(3)} | ${fmt(median(rounds.map((r) => r.total)))} | ${median(answered).toFixed(3)} / ${Math.max(...answered).toFixed(3)} | ${fmt(median(rounds.map((r) => r.inSwitch)))} | ${fmt(median(rounds.map((r) => r.stall)))} | ${target} |`,
  );
}
console.log(
  '\nEvery round: to the topology published ms / slowest engine alone ms = ratio (to every member continued ms)',
);
for (const { name, rounds } of results)
  console.log(
    `${name}: ${rounds.map((r) => `${fmt(r.published)}/${fmt(r.solo)}=${(r.published / r.solo).toFixed(2)} (${fmt(r.total)})`).join('  ')}`,
  );
console.log(
  '\nWhere the time went (median ms from the command at which each phase ended, the last member for per-member phases; in brackets: since the phase before)',
);
console.log(`| mode | ${PHASES.join(' | ')} | returned |`);
console.log(`|---|${PHASES.map(() => '---|').join('')}---|`);
for (const { name, rounds } of results) {
  const withPhases = rounds.flatMap((r) => (r.phases ? [r.phases] : []));
  if (withPhases.length === 0) continue;
  const end = (p: keyof NonNullable<Round['phases']>) => median(withPhases.map((x) => x[p]));
  // Each phase from the one it waits for (loading starts per member as soon as it stopped: its "since" is from
  // the last stop).
  const from: Record<string, number> = {
    stopped: 0,
    loaded: end('stopped'),
    read_back: end('loaded'),
    committed: end('read_back'),
    published: end('committed'),
    continued: end('published'),
    returned: end('continued'),
  };
  const cells = [...PHASES, 'returned' as const].map(
    (p) => `${fmt(end(p))} (+${fmt(end(p) - (from[p] ?? 0))})`,
  );
  console.log(`| ${name} | ${cells.join(' | ')} |`);
}
