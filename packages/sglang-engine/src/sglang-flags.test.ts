/**
 * Conformance of the launch flags against SGLang's own source: every flag `buildServerArgs` can emit, over every
 * example config and every config field it maps, checked against the committed surface of each supported release
 * (surfaces/*.json, read from the wheels; no network here). Where a release lacks a flag, uis must refuse the
 * config for that release before any engine starts, naming the flag and the release.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { planPlacement } from '@uis/planner';
import {
  type EngineGroupSpec,
  EngineGroupSpecSchema,
  type InferenceModelSpec,
  InferenceModelSpecSchema,
  isUisError,
  loadConfig,
  type ReplicaPlacement,
} from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { buildServerArgs, plannedServerFlags, type ServerArgsOptions } from './server-args.ts';
import { parseLikeArgparse } from './sglang-argparse.ts';
import { DEFAULT_SGLANG_VERSION, flagOf, SGLANG_VERSIONS, surfaceOf } from './sglang-surface.ts';

interface Case {
  name: string;
  model: InferenceModelSpec;
  group: EngineGroupSpec;
  replica: ReplicaPlacement;
  offload: boolean;
}

const EXAMPLES = join(import.meta.dirname, '..', '..', '..', 'examples');

/** Every replica of every example config (the bad-* ones are invalid on purpose), as the planner places it. */
function exampleCases(): Case[] {
  const cases: Case[] = [];
  for (const file of readdirSync(EXAMPLES).filter((f) => f.endsWith('.yaml') && !f.startsWith('bad-'))) {
    const config = loadConfig(readFileSync(join(EXAMPLES, file), 'utf8'), file);
    const result = planPlacement(config);
    if (!result.ok) throw new Error(`${file} does not plan: ${JSON.stringify(result.errors)}`);
    for (const p of result.plan.placements) {
      const role = config.roles[p.role];
      const model = role?.models.find((m) => m.name === p.model);
      const group = model?.engine_groups[p.group];
      if (role === undefined || model === undefined || group === undefined) continue;
      for (const replica of p.replicas) {
        cases.push({
          name: `${file} ${replica.engine_id}`,
          model,
          group,
          replica,
          offload: role.deployment.offload,
        });
      }
    }
  }
  return cases;
}

function replica(nnodes: number, worker_type: ReplicaPlacement['worker_type'] = 'regular'): ReplicaPlacement {
  return {
    engine_id: 'm/0',
    replica: 0,
    group: 0,
    worker_type,
    nnodes,
    nodes: Array.from({ length: nnodes }, (_, rank) => ({
      node: `node-${rank}`,
      node_rank: rank,
      bundle_indices: [0, 1],
      gpu_ids: [0, 1],
      base_gpu_id: 0,
      gpu_id_step: 1,
    })),
  };
}

const model = (extra: Record<string, unknown> = {}) =>
  InferenceModelSpecSchema.parse({
    name: 'm',
    model_path: '/models/m',
    engine_groups: [{ num_gpus: 2, gpus_per_engine: 2 }],
    weight_source: 'disk',
    ...extra,
  });
const group = (extra: Record<string, unknown> = {}) =>
  EngineGroupSpecSchema.parse({ num_gpus: 2, gpus_per_engine: 2, ...extra });

/** One case per branch of the builder: each config field that maps to a flag turned on at least once. */
const BRANCH_CASES: Case[] = [
  { name: 'plain', model: model(), group: group(), replica: replica(1), offload: false },
  { name: 'offload', model: model(), group: group(), replica: replica(1), offload: true },
  {
    name: 'static model with offload (CPU weight backup)',
    model: model({ weight_source: 'static', served_model_name: 'judge' }),
    group: group(),
    replica: replica(1),
    offload: true,
  },
  {
    name: 'dp attention',
    model: model(),
    group: group({ dp: 2, enable_dp_attention: true }),
    replica: replica(1),
    offload: false,
  },
  {
    name: 'prefill',
    model: model(),
    group: group({ worker_type: 'prefill' }),
    replica: replica(1, 'prefill'),
    offload: false,
  },
  {
    name: 'decode',
    model: model(),
    group: group({ worker_type: 'decode' }),
    replica: replica(1, 'decode'),
    offload: false,
  },
  {
    name: 'multi-node',
    model: model(),
    group: group({ tp: 2, pp: 2, gpus_per_engine: 4, num_gpus: 4 }),
    replica: replica(2),
    offload: false,
  },
];

/** Every flag the builder can emit; a flag added to server-args.ts must be added here (and so checked). */
const UIS_FLAGS = [
  '--base-gpu-id',
  '--disaggregation-bootstrap-port',
  '--disaggregation-mode',
  '--dist-init-addr',
  '--dp-size',
  '--enable-dp-attention',
  '--enable-memory-saver',
  '--enable-metrics',
  '--enable-weights-cpu-backup',
  '--ep-size',
  '--gpu-id-step',
  '--host',
  '--max-running-requests',
  '--model-path',
  '--nnodes',
  '--node-rank',
  '--port',
  '--pp-size',
  '--served-model-name',
  '--skip-server-warmup',
  '--tp-size',
];

/** Releases that lack a flag uis emits, and so refuse the configs that need it (see the README table). */
const KNOWN_GAPS: Record<string, string[]> = {
  '--enable-weights-cpu-backup': ['0.5.2'],
};

const OPTS: ServerArgsOptions = {
  host: '127.0.0.1',
  port: 30000,
  offload: false,
  distInitAddr: '10.0.0.1:5000',
  bootstrapPort: 8998,
  command: ['launch_server'],
};

const build = (c: Case, version: string) =>
  buildServerArgs({ ...c.model, sglang_version: version }, c.group, c.replica, {
    ...OPTS,
    offload: c.offload,
  });

/** The flags a case emits, as planned (before any release checks them). */
function emitted(c: Case): string[] {
  return plannedServerFlags(c.model, c.group, c.replica, { ...OPTS, offload: c.offload }).flatMap((p) =>
    p.flags.map((f) => f.flag),
  );
}

const ALL_CASES = [...exampleCases(), ...BRANCH_CASES];

describe('launch flags against each supported SGLang release', () => {
  it('covers every flag the builder emits, over the examples and one case per mapped field', () => {
    expect(exampleCases().length).toBeGreaterThan(5);
    expect([...new Set(ALL_CASES.flatMap(emitted))].sort()).toEqual(UIS_FLAGS);
  });

  it('emits only flags each release has, but the known gaps (flag -> releases without it)', () => {
    const gaps: Record<string, string[]> = {};
    for (const flag of new Set(ALL_CASES.flatMap(emitted))) {
      const without = SGLANG_VERSIONS.filter((v) => flagOf(surfaceOf(v)!, flag) === undefined);
      if (without.length > 0) gaps[flag] = without;
    }
    expect(gaps, 'flags uis emits that an SGLang release does not have (flag: releases)').toEqual(KNOWN_GAPS);
  });

  for (const version of SGLANG_VERSIONS) {
    it(`SGLang ${version}: every case parses as its argparse would, or is refused naming the flag and ${version}`, () => {
      const surface = surfaceOf(version)!;
      for (const c of ALL_CASES) {
        const missing = emitted(c).filter((f) => flagOf(surface, f) === undefined);
        let result: ReturnType<typeof build> | undefined;
        let error: unknown;
        try {
          result = build(c, version);
        } catch (e) {
          error = e;
        }
        if (missing.length > 0) {
          expect(isUisError(error) && error.code, c.name).toBe('sglang_flag_unsupported');
          expect(String((error as Error).message), c.name).toContain(
            `SGLang ${version} has no ${missing[0]}`,
          );
          continue;
        }
        expect(error, c.name).toBeUndefined();
        for (const p of result!.processes) {
          // argv[0] is the command; the rest is what SGLang's parser reads.
          expect(parseLikeArgparse(surface, p.argv.slice(1)).error, `${c.name} on ${version}`).toBeNull();
        }
      }
    });
  }
});

describe('server_args overrides checked against the release', () => {
  const overrideCase = (server_args: Record<string, unknown>, version: string) => () =>
    build({ ...BRANCH_CASES[0]!, group: group({ server_args }) }, version);

  it('passes a flag the release has, with a value of its type', () => {
    for (const version of SGLANG_VERSIONS) {
      expect(overrideCase({ mem_fraction_static: 0.8, log_level: 'info' }, version)).not.toThrow();
    }
  });

  it('refuses a field the release does not have, naming the flag, the release and the config path', () => {
    const err = (() => {
      try {
        overrideCase({ enable_weights_cpu_backup: true }, '0.5.2')();
      } catch (e) {
        return e;
      }
    })();
    expect(isUisError(err) && err.code).toBe('sglang_flag_unsupported');
    expect(isUisError(err) && err.path).toBe('engine_groups[0].server_args.enable_weights_cpu_backup');
    expect((err as Error).message).toMatch(
      /^SGLang 0\.5\.2 has no --enable-weights-cpu-backup .*0\.5\.6\.post2/,
    );
  });

  it('refuses a value argparse would refuse: wrong type, not a choice, a value on a switch', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ mem_fraction_static: 'lots' }, /--mem-fraction-static takes a number, not "lots"/],
      [{ max_running_requests: 1.5 }, /--max-running-requests takes an integer/],
      [{ load_format: 'bogus' }, /--load-format takes one of auto, /],
      [{ enable_memory_saver_x: true }, /has no --enable-memory-saver-x/],
      [{ skip_tokenizer_init: 'yes' }, /--skip-tokenizer-init is a switch and takes no value/],
    ];
    for (const [args, message] of cases) {
      expect(overrideCase(args, DEFAULT_SGLANG_VERSION), JSON.stringify(args)).toThrow(message);
    }
  });

  it("leaves the simulator's own sim_* knobs to the simulator, and still checks the flags beside them", () => {
    for (const version of SGLANG_VERSIONS) {
      expect(overrideCase({ sim_onload_ms: 6000, mem_fraction_static: 0.8 }, version)).not.toThrow();
    }
    expect(overrideCase({ sim_onload_ms: 6000, enable_weights_cpu_backup: true }, '0.5.2')).toThrow(
      /has no --enable-weights-cpu-backup/,
    );
  });

  it('refuses a release uis has no surface for', () => {
    expect(() => build({ ...BRANCH_CASES[0]! }, '0.1.0')).toThrow(
      /uis has no surface for SGLang 0\.1\.0; supported: 0\.5\.2/,
    );
  });
});
