import type { EngineLauncher, LaunchSpec } from '@uis/sglang-engine';
import { type InferenceRoleSpec, isUisError } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import {
  ExternalLauncher,
  type LaunchRequest,
  LocalLauncher,
  SimLauncher,
  simModelArgs,
} from './launchers.ts';
import { planConfig, splitConfig, twoNodeTeacherConfig } from './testing.ts';

/** Records what would be spawned and refuses to spawn it. */
class RecordingLauncher implements EngineLauncher {
  readonly specs: LaunchSpec[] = [];
  async launch(spec: LaunchSpec): Promise<never> {
    this.specs.push(spec);
    throw new Error('recorded, not launched');
  }
}

function request(
  engine: string,
  config: unknown,
  roleName: 'rollout' | 'teacher' = 'rollout',
): LaunchRequest {
  const { plan, roles } = planConfig(config);
  const role = roles[roleName] as InferenceRoleSpec;
  const placement = plan.placements.find(
    (p) => p.role === roleName && p.replicas.some((r) => r.engine_id === engine),
  );
  const replica = placement?.replicas.find((r) => r.engine_id === engine);
  const model = role.models.find((m) => m.name === placement?.model);
  if (!placement || !replica || !model) throw new Error(`no ${engine} in plan`);
  return {
    role: role.role,
    model,
    group: model.engine_groups[placement.group] as LaunchRequest['group'],
    placement,
    replica,
    offload: true,
    generation: 0,
  };
}

describe('launchers', () => {
  it('local: the real `python -m sglang.launch_server` command line from buildServerArgs, on free ports', async () => {
    const rec = new RecordingLauncher();
    const engine = await new LocalLauncher({ engineLauncher: rec }).create(
      request('policy/1', splitConfig()),
    );
    await expect(engine.start({ deadlineMs: 5_000 })).rejects.toThrow(/recorded, not launched/);
    const spec = rec.specs[0] as LaunchSpec;
    const p = spec.processes[0];
    expect(p?.argv.slice(0, 3)).toEqual(['python', '-m', 'sglang.launch_server']);
    const flag = (name: string) => p?.argv[(p?.argv.indexOf(name) ?? -2) + 1];
    expect(flag('--model-path')).toBe('/models/policy');
    expect(flag('--host')).toBe('127.0.0.1');
    expect(Number(flag('--port'))).toBeGreaterThan(0);
    expect(p?.argv).toContain('--enable-memory-saver');
    expect(p?.env.CUDA_VISIBLE_DEVICES).toBe('2,3');
    expect(p?.env.SGLANG_MEMORY_SAVER_CUDA_GRAPH).toBe('true');
    expect(spec.headUrl).toBe(`http://127.0.0.1:${flag('--port')}`);
    expect(engine.baseUrl).toBe(spec.headUrl);
  });

  it('local: a two-node replica gets one process per node and a rendezvous address', async () => {
    const rec = new RecordingLauncher();
    const engine = await new LocalLauncher({ engineLauncher: rec, command: ['sglang-sim'] }).create(
      request('teacher/0', twoNodeTeacherConfig(), 'teacher'),
    );
    await expect(engine.start({ deadlineMs: 5_000 })).rejects.toThrow();
    const procs = rec.specs[0]?.processes ?? [];
    expect(procs.map((x) => x.nodeRank)).toEqual([0, 1]);
    expect(procs.every((x) => x.argv[0] === 'sglang-sim')).toBe(true);
    const addr = procs.map((x) => x.argv[x.argv.indexOf('--dist-init-addr') + 1]);
    expect(addr[0]).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(addr[1]).toBe(addr[0]);
    const ports = procs.map((x) => x.argv[x.argv.indexOf('--port') + 1]);
    expect(new Set(ports).size).toBe(2);
  });

  it("sim: the model's memory becomes the simulator's byte model (weights, KV share, CUDA graphs)", async () => {
    const req = request('policy/1', splitConfig());
    const sized = {
      ...req,
      model: {
        ...req.model,
        memory: { parameters: 8.2e9, dtype: 'bf16' as const, kv_cache_share: 0.3, cuda_graph_gb: 1 },
      },
    };
    expect(simModelArgs(req)).toEqual([]);
    expect(simModelArgs(sized)).toEqual([
      '--sim-weight-gb',
      '16.4',
      '--sim-kv-cache-share',
      '0.3',
      '--sim-cuda-graph-gb',
      '1',
    ]);
    const rec = new RecordingLauncher();
    const engine = await new SimLauncher({ engineLauncher: rec }).create(sized);
    await expect(engine.start({ deadlineMs: 5_000 })).rejects.toThrow(/recorded, not launched/);
    const argv = rec.specs[0]?.processes[0]?.argv ?? [];
    expect(argv[argv.indexOf('--sim-weight-gb') + 1]).toBe('16.4');
  });

  it('external: attaches by URL and refuses a replica it has no URL for', async () => {
    const req = request('policy/0', splitConfig());
    const engine = await new ExternalLauncher({ 'policy/0': 'http://10.0.0.5:30000/' }).create(req);
    expect(engine.baseUrl).toBe('http://10.0.0.5:30000');
    expect(engine.pids()).toEqual([]);
    const err = await new ExternalLauncher({}).create(req).catch((e: unknown) => e);
    expect(isUisError(err) && err.code).toBe('external_url_missing');
  });
});
