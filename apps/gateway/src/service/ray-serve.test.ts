import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { type ControlPlane, createControlPlane } from '@uis/control-plane';
import { canConnect, pidsMentioning, type RayHead, startRayHead } from '@uis/manager';
import { RAY_TEST_MANAGER_OPTIONS } from '@uis/manager/testing';
import { alive } from '@uis/sglang-engine/testing';
import { type ConsoleState, ConsoleStateSchema, isUisError, parseConfig, type UisConfig } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLauncher } from '../cli/serve-command.ts';
import { UisServer } from '../server/uis-server.ts';

/** Why Ray cannot run here, or undefined. */
function rayUnavailable(): string | undefined {
  try {
    execFileSync('python3', ['-c', 'import ray'], { stdio: 'pipe' });
    return undefined;
  } catch {
    return 'python3 cannot import ray (pip install ray==2.60.0)';
  }
}
const skip = rayUnavailable();
if (skip) console.log(`[uis serve on Ray tests skipped] ${skip}`);

const OPTIONS = RAY_TEST_MANAGER_OPTIONS;

function rayConfig(ray: Record<string, unknown>, teacher = true): UisConfig {
  const role = (name: string, weight_source: string, num_gpus: number, gpus_per_engine: number) => ({
    deployment: { mode: 'decoupled', offload: false },
    routing: { default_model: name },
    models: [
      { name, model_path: `/models/${name}`, weight_source, engine_groups: [{ num_gpus, gpus_per_engine }] },
    ],
  });
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 4 }] },
    gateway: { launcher: 'ray', ray: { engine: 'sim', engine_host: '127.0.0.1', ...ray } },
    roles: {
      rollout: role('policy', 'disk', 2, 2),
      ...(teacher ? { teacher: role('teacher', 'static', 1, 1) } : {}),
    },
  });
}

/** Ray's GCS as a separate driver sees it (independent of the service's bridge). */
function observe(address: string, code: string): unknown {
  const script =
    `import ray, json, sys\nray.init(address="${address}", namespace="uis", logging_level="ERROR", log_to_driver=False)\n` +
    `${code}\nsys.stdout.write("@@" + json.dumps(out))`;
  const text = execFileSync('python3', ['-c', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 120_000,
  }).toString();
  return JSON.parse(text.slice(text.lastIndexOf('@@') + 2));
}

function rayState(address: string): {
  pgs: Array<{ name: string; state: string }>;
  actors: Array<{ name: string; state: string }>;
} {
  return observe(
    address,
    `from ray.util.placement_group import placement_group_table\n` +
      `out = {"pgs": [{"name": v.get("name", ""), "state": v.get("state", "")} for v in placement_group_table().values()],\n` +
      `       "actors": [{"name": a.get("Name", ""), "state": a.get("State", "")} for a in ray._private.state.actors().values()]}`,
  ) as never;
}

/** Per bundle of each named PG: the GPU ids a task Ray schedules on it gets (what the engine's bundle holds). */
function bundleGpus(address: string, pgs: Record<string, number>): Record<string, number[][]> {
  return observe(
    address,
    `from ray.util.placement_group import get_placement_group\n` +
      `from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy as S\n` +
      `@ray.remote(num_cpus=0.01, num_gpus=0.01)\ndef gpus(): return [int(g) for g in ray.get_gpu_ids()]\n` +
      `out = {}\n` +
      `for name, n in ${JSON.stringify(pgs)}.items():\n` +
      `    pg = get_placement_group(name)\n` +
      `    out[name] = ray.get([gpus.options(scheduling_strategy=S(placement_group=pg, placement_group_bundle_index=i)).remote() for i in range(n)])`,
  ) as never;
}

const listening = (port: number): Promise<boolean> => canConnect('127.0.0.1', port);

async function consoleStateOf(url: string): Promise<ConsoleState> {
  const body = (await (await fetch(`${url}/trpc/state`)).json()) as { result: { data: unknown } };
  return ConsoleStateSchema.parse(body.result.data);
}

async function chat(url: string, role: string, model: string) {
  const res = await fetch(`${url}/${role}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
  });
  return {
    status: res.status,
    body: (await res.json()) as { choices?: Array<{ message: { content: string } }> },
  };
}

const enginePids = (plane: ControlPlane): number[] =>
  [...plane.managers.values()].flatMap((m) =>
    Object.values(m.snapshot().models).flatMap((x) => x.replicas.flatMap((r) => r.pids ?? [])),
  );

describe('uis serve: the ray block and --launcher ray', () => {
  it('--launcher accepts ray', () => {
    expect(parseLauncher('ray')).toBe('ray');
    expect(() => parseLauncher('slurm')).toThrow('must be sim, local, external or ray');
  });

  it('only the Ray launcher reports an actual placement; the sim launcher knows only the plan', async () => {
    const sim = await createControlPlane({ config: rayConfig({}), launcher: 'sim' });
    try {
      expect(sim.ray).toBeNull();
      expect(sim.launcher.kind).toBe('sim');
      expect(sim.actualPlacement('policy/0')).toBeNull();
    } finally {
      await sim.stop();
    }
  }, 60_000);

  it('a bad ray block is refused with the path of every bad value', () => {
    let err: unknown;
    try {
      rayConfig({
        address: 'not an address',
        engine: 'vllm',
        engine_command: [],
        connect_timeout_s: 0,
        extra: 1,
      });
    } catch (e) {
      err = e;
    }
    expect(isUisError(err) && err.code).toBe('invalid_config');
    const paths = ((err as { details: Array<{ path: string }> }).details ?? []).map((d) => d.path).sort();
    expect(paths).toEqual([
      'gateway.ray.address',
      'gateway.ray.connect_timeout_s',
      'gateway.ray.engine',
      'gateway.ray.engine_command',
      'gateway.ray.extra',
    ]);
  });

  it.skipIf(skip !== undefined)(
    'an unreachable cluster fails start() with gateway.ray.address and leaves no bridge behind',
    async () => {
      const err = await createControlPlane({
        config: rayConfig({ address: '127.0.0.1:1', connect_timeout_s: 5 }),
        launcher: 'ray',
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isUisError(err) && err.path).toBe('gateway.ray.address');
      expect(pidsMentioning('uis_ray_bridge.py --address 127.0.0.1:1 ')).toEqual([]);
    },
    120_000,
  );
});

describe.skipIf(skip !== undefined)('uis serve with launcher ray on an existing Ray cluster', () => {
  // Someone else's cluster (one node, 4 logical GPUs): the service connects to it by address and must leave it
  // running, with nothing of its own left in it.
  let cluster: RayHead;
  beforeAll(async () => {
    cluster = await startRayHead({ numGpus: 4, numCpus: 6 });
  }, 180_000);
  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('engines come up as Ray actors, chat is answered, the console shows where Ray put them, stop cleans up', async () => {
    const config = rayConfig({ address: cluster.address });
    const plane = await createControlPlane({
      config,
      launcher: config.gateway?.launcher ?? 'sim',
      managerOptions: OPTIONS,
    });
    const server = new UisServer({ plane, adminToken: 'ray-serve-admin' });
    let bridgePid: number | undefined;
    let pids: number[] = [];
    const pgNames = Object.values(plane.plan.pools)
      .map((p) => p.pg_name)
      .sort();
    try {
      const { url } = await server.listen(0, '127.0.0.1');
      bridgePid = plane.ray?.runtime?.bridge.pid;
      pids = enginePids(plane);
      expect(pids).toHaveLength(2);

      // The plan's pools are placement groups the manager created in Ray; one actor per engine, named by engine.
      const during = rayState(cluster.address);
      expect(pgNames).toEqual(['uis-rollout', 'uis-teacher']);
      expect(
        during.pgs
          .filter((p) => p.state === 'CREATED')
          .map((p) => p.name)
          .sort(),
      ).toEqual(pgNames);
      expect(
        during.actors
          .filter((a) => a.name.startsWith('uis:') && a.state === 'ALIVE')
          .map((a) => a.name.split('#')[0])
          .sort(),
      ).toEqual(['uis:policy/0/node0', 'uis:teacher/0/node0']);

      for (const [role, model] of [
        ['rollout', 'policy'],
        ['teacher', 'teacher'],
      ] as const) {
        const r = await chat(url, role, model);
        expect(r.status).toBe(200);
        expect(typeof r.body.choices?.[0]?.message.content).toBe('string');
      }

      // Console: planned as before, actual as Ray reports it; it matches the GPUs another driver finds in the
      // same bundles.
      const state = await consoleStateOf(url);
      const byId = new Map(state.replicas.map((r) => [r.engine_id, r]));
      const gpus = bundleGpus(cluster.address, { 'uis-rollout': 2, 'uis-teacher': 1 });
      const policy = byId.get('policy/0');
      const teacher = byId.get('teacher/0');
      expect(policy?.actual).toEqual([
        { node: 'node-0', gpu_ids: (gpus['uis-rollout'] ?? []).flat().sort((a, b) => a - b) },
      ]);
      expect(teacher?.actual).toEqual([{ node: 'node-0', gpu_ids: (gpus['uis-teacher'] ?? []).flat() }]);
      expect(policy?.planned).toEqual([{ node: 'node-0', gpu_ids: [0, 1] }]);
      const used = [...(policy?.actual?.[0]?.gpu_ids ?? []), ...(teacher?.actual?.[0]?.gpu_ids ?? [])];
      expect(new Set(used).size).toBe(3);
      for (const g of used) expect(g >= 0 && g < 4).toBe(true);
    } finally {
      await server.close();
      await plane.stop();
    }
    // Nothing of ours is left in the cluster, and the cluster itself is still there.
    const after = rayState(cluster.address);
    expect(after.pgs.filter((p) => pgNames.includes(p.name) && p.state !== 'REMOVED')).toEqual([]);
    expect(after.actors.filter((a) => a.name.startsWith('uis:') && a.state !== 'DEAD')).toEqual([]);
    expect(bridgePid !== undefined && alive(bridgePid)).toBe(false);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  }, 300_000);
});

describe.skipIf(skip !== undefined)('uis serve with launcher ray and no address: a head of its own', () => {
  it('starts a local head, serves from it, and stopping leaves no Ray process behind', async () => {
    const config = rayConfig({ head: { num_gpus: 4, num_cpus: 4 } }, false);
    const plane = await createControlPlane({ config, launcher: 'ray', managerOptions: OPTIONS });
    const server = new UisServer({ plane, adminToken: 'ray-serve-admin' });
    let head: RayHead | null = null;
    let pids: number[] = [];
    try {
      head = plane.ray?.head ?? null;
      expect(head).not.toBeNull();
      expect(pidsMentioning((head as RayHead).tempDir).length).toBeGreaterThan(0);
      const { url } = await server.listen(0, '127.0.0.1');
      pids = enginePids(plane);
      expect(pids).toHaveLength(1);
      const r = await chat(url, 'rollout', 'policy');
      expect(r.status).toBe(200);
      const state = await consoleStateOf(url);
      expect(
        state.replicas.map((x) => [x.engine_id, x.actual?.[0]?.node, x.actual?.[0]?.gpu_ids.length]),
      ).toEqual([['policy/0', 'node-0', 2]]);
    } finally {
      await server.close();
      await plane.stop();
    }
    const h = head as RayHead;
    expect(pidsMentioning(h.tempDir)).toEqual([]);
    expect(alive(h.pid)).toBe(false);
    expect(await listening(Number(h.address.split(':')[1]))).toBe(false);
    expect(existsSync(h.tempDir)).toBe(false);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  }, 300_000);
});
