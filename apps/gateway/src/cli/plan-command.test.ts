import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..', '..', '..');
const bin = join(root, 'apps', 'gateway', 'bin', 'uis-dev.mjs');
const example = (f: string) => join(root, 'examples', f);
const tmp = mkdtempSync(join(tmpdir(), 'uis-plan-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Runs the real binary; spawnSync waits for exit, so no process outlives a test. */
function uis(...args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const file = (name: string, text: string) => {
  const p = join(tmp, name);
  writeFileSync(p, text);
  return p;
};

describe('uis plan', { timeout: 60_000 }, () => {
  it('prints the table of a valid config and exits 0', () => {
    const r = uis('plan', '--config', example('demo.yaml'));
    expect(r.code).toBe(0);
    expect(r.out).toContain('mode: colocated_defer');
    expect(r.out).toMatch(/ROLE\s+MODEL\s+GROUP\s+BUNDLES\s+GPUS PER NODE\s+REPLICAS\s+PHASE\s+OWNER/);
    expect(r.out).toMatch(
      /genrm\s+judge\s+0\s+actor\[0\.\.15\]\s+node-0:0-7 node-1:0-7\s+4 x tp4\s+genrm_score \(deferred\)\s+controller/,
    );
  });

  it('takes the config file as its argument, the same as --config (the README: uis plan examples/split.yaml)', () => {
    const positional = uis('plan', 'examples/split.yaml');
    expect(positional.err).toBe('');
    expect(positional.code).toBe(0);
    expect(positional.out).toContain('mode: colocated_split');
    expect(positional.out).toBe(uis('plan', '--config', 'examples/split.yaml').out);
    const json = uis('plan', example('bad-split-overlap.yaml'), '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toMatchObject({ ok: false, errors: [{ code: 'split_overlap' }] });
  });

  it("refuses a launch flag the model's SGLang release lacks, naming the flag and the release", () => {
    const defer = readFileSync(example('defer.yaml'), 'utf8').replace(
      '        model_path: /models/judge\n',
      '        model_path: /models/judge\n        sglang_version: "0.5.2"\n',
    );
    expect(defer).toContain('sglang_version: "0.5.2"');
    const r = uis('plan', '--config', file('old-sglang.yaml', defer), '--json');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).errors).toEqual([
      {
        code: 'sglang_flag_unsupported',
        path: 'roles.genrm.models[0].sglang_version',
        message:
          'SGLang 0.5.2 has no --enable-weights-cpu-backup (from deployment.offload: a static model keeps a CPU copy of its weights to wake with); releases that have it: 0.5.6.post2 and later (0.5.6.post2, 0.5.9, 0.5.10.post1, 0.5.12, 0.5.15.post1, 0.5.17, 0.5.23). Set sglang_version to one of them, or change deployment.offload',
      },
    ]);
    const newer = uis(
      'plan',
      '--config',
      file('newer-sglang.yaml', defer.replace('"0.5.2"', '"0.5.6.post2"')),
    );
    expect(newer.code).toBe(0);
  });

  it('prints exactly the JSON shape of the issue', () => {
    const r = uis('plan', '--config', example('multinode-tp.yaml'), '--json');
    expect(r.code).toBe(0);
    const json = JSON.parse(r.out);
    expect(Object.keys(json)).toEqual(['ok', 'mode', 'pools', 'total_gpus', 'placements', 'errors']);
    expect(json).toMatchObject({
      ok: true,
      mode: 'colocated_split',
      pools: { actor: 16 },
      total_gpus: 16,
      errors: [],
    });
    expect(json.placements[0]).toEqual({
      role: 'rollout',
      model: 'big',
      group: 0,
      worker_type: 'regular',
      num_gpus: 16,
      gpus_per_engine: 8,
      tp: 4,
      pp: 2,
      dp: 1,
      bundle_start: 0,
      bundle_stop: 16,
      bundle_indices: Array.from({ length: 16 }, (_, i) => i),
      gpu_ids: Array.from({ length: 16 }, (_, i) => i),
      replicas: 2,
      nodes_per_engine: 2,
      pool: 'actor',
      owner: 'controller',
      phase: null,
      deferred: false,
    });
  });

  it('exits 1 with the violations of an invalid layout', () => {
    const r = uis('plan', '--config', example('bad-split-overlap.yaml'));
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/split_overlap\s+roles\.genrm\.models\[0\]\.engine_groups\[0\]/);
    const j = uis('plan', '--config', example('bad-split-overlap.yaml'), '--json');
    expect(j.code).toBe(1);
    expect(JSON.parse(j.out)).toMatchObject({
      ok: false,
      mode: 'colocated_split',
      errors: [{ code: 'split_overlap' }],
    });
  });

  it('plans Relax flags given after --, reading --sglang-config itself', () => {
    const pd = file(
      'pd.yaml',
      'sglang:\n  - name: policy\n    num_gpus_per_engine: 2\n    engine_groups:\n      - { worker_type: prefill, num_gpus: 2 }\n      - { worker_type: decode, num_gpus: 6 }\n',
    );
    const r = uis(
      'plan',
      '--json',
      '--relax-args',
      '--',
      '--resource',
      '{"actor": [1, 8], "rollout": [1, 8]}',
      '--sglang-config',
      pd,
    );
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const json = JSON.parse(r.out);
    expect(json.mode).toBe('decoupled');
    expect(
      json.placements.map((p: { worker_type: string; replicas: number }) => [p.worker_type, p.replicas]),
    ).toEqual([
      ['prefill', 1],
      ['decode', 3],
    ]);
  });

  it.each<[string, string[], RegExp]>([
    ['malformed YAML', ['--config', 'BAD_YAML'], /config_parse_error/],
    [
      'unknown field',
      ['--config', 'UNKNOWN_FIELD'],
      /roles\.rollout\.models\[0\]\.engine_groups\[0\]\.gpus: unknown field "gpus"/,
    ],
    ['negative GPUs', ['--config', 'NEGATIVE'], /cluster\.nodes\[0\]\.gpus/],
    ['missing file', ['--config', '/nonexistent/x.yaml'], /--config: cannot read .*no such file/],
    [
      'missing file as the argument',
      ['/nonexistent/x.yaml'],
      /FILE: cannot read .*no such file \[missing_file\]/,
    ],
    ['two files', [example('demo.yaml'), example('split.yaml')], /unexpected arguments: .*split\.yaml/],
    ['a file and --config', ['--config', example('demo.yaml'), 'x.yaml'], /unexpected arguments: x\.yaml/],
    ['a file and --relax-args', ['--config', example('demo.yaml'), '--relax-args'], /exactly one of FILE/],
    [
      'bad flag',
      ['--relax-args', '--', '--resource', '{"actor": [1, 8]}', '--colocatx'],
      /--colocatx: unknown Relax flag/,
    ],
    [
      'ambiguous prefix',
      ['--relax-args', '--', '--resource', '{"actor": [1, 8], "rollout": [1, 8]}', '--rollout-num', '4'],
      /ambiguous option: --rollout-num could match --rollout-num-gpus, --rollout-num-gpus-per-engine/,
    ],
    [
      'a prefix of a known flag among unknown training flags',
      [
        '--relax-args',
        '--allow-unknown-flags',
        '--',
        '--resource',
        '{"actor": [1, 8], "rollout": [1, 8]}',
        '--rollout-num-gpus-per-eng',
        '4',
        '--lr',
        '1e-6',
      ],
      /--rollout-num-gpus-per-eng abbreviates --rollout-num-gpus-per-engine/,
    ],
    [
      'contradictory flags',
      [
        '--relax-args',
        '--',
        '--resource',
        '{"actor": [1, 8], "rollout": [1, 8]}',
        '--colocate',
        '--fully-async',
      ],
      /needs --hybrid/,
    ],
    ['no input', [], /exactly one of FILE \(or --config FILE\) or --relax-args/],
    ['unknown CLI option', ['--config', 'x', '--bogus'], /unexpected arguments|unknown option/],
  ])('exits 2 on unusable input: %s, without a stack trace', (_name, args, pattern) => {
    const fixtures: Record<string, string> = {
      BAD_YAML: file('bad.yaml', 'cluster: [\n  nodes'),
      UNKNOWN_FIELD: file(
        'unknown.yaml',
        'cluster: { nodes: [{ name: n, gpus: 8 }] }\nroles:\n  rollout:\n    deployment: { mode: decoupled }\n    routing: {}\n    models:\n      - { name: p, model_path: /m, weight_source: dcs, engine_groups: [{ num_gpus: 8, gpus_per_engine: 8, gpus: 1 }] }\n',
      ),
      NEGATIVE: file('negative.yaml', 'cluster: { nodes: [{ name: n, gpus: -8 }] }\nroles: {}\n'),
    };
    const r = uis('plan', ...args.map((a) => fixtures[a] ?? a));
    expect(r.code).toBe(2);
    expect(`${r.out}${r.err}`).toMatch(pattern);
    expect(r.err).not.toMatch(/\n\s+at /);
  });
});
