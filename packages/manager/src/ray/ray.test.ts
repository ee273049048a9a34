import { waitFor } from '@uis/sglang-engine/testing';
import {
  type DiscoverySnapshot,
  type InferenceRoleSpec,
  isUisError,
  type PlacementPlan,
  UisError,
} from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceManager } from '../inference-manager.ts';
import { SIM_BIN } from '../launchers.ts';
import { planConfig, RAY_TEST_MANAGER_OPTIONS } from '../testing.ts';
import { RayBridge } from './ray-bridge.ts';
import { RayLauncher } from './ray-launcher.ts';
import { RayPlacementGroups } from './ray-placement-groups.ts';
import { LocalRayCluster, rayUnavailable } from './testing.ts';

const skip = rayUnavailable();
if (skip) console.log(`[ray tests skipped] ${skip}`);

const OPTIONS = RAY_TEST_MANAGER_OPTIONS;

type Roles = 'rollout' | 'genrm' | 'teacher';
const group = (num_gpus: number, gpus_per_engine: number) => ({ num_gpus, gpus_per_engine });
const model = (name: string, groups: Array<ReturnType<typeof group>>, weight_source = 'static') => ({
  name,
  model_path: `/models/${name}`,
  weight_source,
  engine_groups: groups,
  // Recovery of a dead replica is opt-in per model.
  fault_tolerance_enabled: true,
});
const NAMES: Record<Roles, string> = { rollout: 'policy', genrm: 'judge', teacher: 'teacher' };

/** 2 Ray nodes x 4 logical GPUs, as the planner sees them. */
function config(
  roles: Partial<
    Record<Roles, { mode: string; gpus: number; perEngine: number; pg_owner?: string; pg_name?: string }>
  >,
  actorGpus = 0,
) {
  const out: Record<string, unknown> = {};
  for (const [role, r] of Object.entries(roles) as Array<[Roles, NonNullable<(typeof roles)[Roles]>]>) {
    out[role] = {
      deployment: {
        mode: r.mode,
        offload: r.mode !== 'decoupled',
        ...(r.pg_owner ? { pg_owner: r.pg_owner } : {}),
        ...(r.pg_name ? { pg_name: r.pg_name } : {}),
      },
      routing: { default_model: NAMES[role] },
      models: [model(NAMES[role], [group(r.gpus, r.perEngine)], role === 'rollout' ? 'disk' : 'static')],
    };
  }
  return {
    cluster: {
      nodes: [
        { name: 'ray-0', gpus: 4 },
        { name: 'ray-1', gpus: 4 },
      ],
    },
    training: { actor_gpus: actorGpus, offload_train: actorGpus > 0 },
    roles: out,
  };
}

const engines = (s: DiscoverySnapshot, m: string) => s.models[m]?.engines ?? [];

async function generate(url: string): Promise<number> {
  const res = await fetch(`${url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 3 } }),
  });
  await res.text();
  return res.status;
}

describe.skipIf(skip !== undefined)('Ray launcher and placement groups on a local 2-node Ray cluster', () => {
  const cluster = new LocalRayCluster(2, 4);
  let bridge: RayBridge;

  beforeAll(async () => {
    await cluster.start();
    bridge = await RayBridge.start({ address: cluster.address, namespace: 'uis' });
  }, 240_000);

  afterAll(async () => {
    await bridge?.close();
    await cluster.stop();
  }, 120_000);

  const alive = (prefix = 'uis:') =>
    cluster.state().actors.filter((a) => a.name.startsWith(prefix) && a.state !== 'DEAD');
  const livePgs = () =>
    cluster
      .state()
      .pgs.filter((p) => p.state !== 'REMOVED')
      .map((p) => p.name)
      .sort();

  function managers(plan: PlacementPlan, roles: Partial<Record<string, InferenceRoleSpec>>, which: Roles[]) {
    const pgs = new RayPlacementGroups(bridge, plan);
    const launcher = new RayLauncher({
      bridge,
      placementGroups: pgs,
      command: [process.execPath, SIM_BIN],
      host: '127.0.0.1',
      pollMs: 100,
    });
    const ms = which.map(
      (r) =>
        new InferenceManager({
          role: roles[r] as InferenceRoleSpec,
          placements: plan.placements,
          pools: plan.pools,
          launcher,
          placementGroups: pgs,
          options: OPTIONS,
        }),
    );
    return { pgs, ms };
  }

  it('decoupled layout: our PGs, one actor per engine on two nodes, recovery of a killed actor, clean shutdown', async () => {
    const { plan, roles } = planConfig(
      config({
        rollout: { mode: 'decoupled', gpus: 4, perEngine: 2 },
        genrm: { mode: 'decoupled', gpus: 2, perEngine: 2 },
        teacher: { mode: 'decoupled', gpus: 2, perEngine: 2 },
      }),
    );
    const { pgs, ms } = managers(plan, roles, ['rollout', 'genrm', 'teacher']);
    const [rollout] = ms as [InferenceManager];
    try {
      await Promise.all(ms.map((m) => m.start()));
      expect(livePgs()).toEqual(['uis-genrm', 'uis-rollout', 'uis-teacher']);
      expect(pgs.owned.sort()).toEqual(['uis-genrm', 'uis-rollout', 'uis-teacher']);
      // 8 bundles over 2 nodes x 4 GPUs: both Ray nodes are used, each engine on one node.
      const probes = await Promise.all(['rollout', 'genrm', 'teacher'].map((p) => pgs.resolve(p)));
      const nodes = new Set(probes.flatMap((p) => [...p.bundles.values()].map((b) => b.node_id)));
      expect(nodes.size).toBe(2);
      const all = ms.flatMap((m) => Object.values(m.registry.snapshot().models).flatMap((x) => x.engines));
      expect(all.map((e) => [e.engine_id, e.state])).toEqual([
        ['policy/0', 'ready'],
        ['policy/1', 'ready'],
        ['judge/0', 'ready'],
        ['teacher/0', 'ready'],
      ]);
      for (const e of all) expect(await generate(e.base_url as string)).toBe(200);
      expect(
        alive()
          .map((a) => a.name.split('#')[0])
          .sort(),
      ).toEqual(['uis:judge/0/node0', 'uis:policy/0/node0', 'uis:policy/1/node0', 'uis:teacher/0/node0']);

      // Killed through Ray (not through us): the manager sees an unexpected exit and restarts the replica.
      const victim = alive('uis:policy/1/')[0]?.name as string;
      cluster.python(`ray.kill(ray.get_actor(${JSON.stringify(victim)}), no_restart=True)`);
      const back = await waitFor(
        () => {
          const e = engines(rollout.registry.snapshot(), 'policy')[1];
          return e?.state === 'ready' && (e.generation ?? 0) >= 1 ? e : undefined;
        },
        90_000,
        'policy/1 restarted',
      );
      expect(await generate(back.base_url as string)).toBe(200);
      expect(alive('uis:policy/1/').map((a) => a.name)).not.toContain(victim);
      expect(alive('uis:policy/1/')).toHaveLength(1);
    } finally {
      await Promise.all(ms.map((m) => m.shutdown()));
    }
    expect(alive()).toEqual([]);
    expect(livePgs()).toEqual([]);
  });

  it('split layout of all three roles in the controller PG: used by name, never removed', async () => {
    cluster.python(
      `from ray.util.placement_group import placement_group\n` +
        `pg = placement_group([{"GPU":1,"CPU":1}]*8, strategy="PACK", name="uis-actor", lifetime="detached")\n` +
        `ray.get(pg.ready(), timeout=60)`,
    );
    try {
      const { plan, roles } = planConfig(
        config(
          {
            rollout: { mode: 'colocated_split', gpus: 4, perEngine: 2 },
            genrm: { mode: 'colocated_split', gpus: 2, perEngine: 2 },
            teacher: { mode: 'colocated_split', gpus: 2, perEngine: 2 },
          },
          8,
        ),
      );
      expect(plan.pools.actor?.owner).toBe('controller');
      const { pgs, ms } = managers(plan, roles, ['rollout', 'genrm', 'teacher']);
      try {
        await Promise.all(ms.map((m) => m.start()));
        expect(pgs.owned).toEqual([]);
        const all = ms.flatMap((m) => Object.values(m.registry.snapshot().models).flatMap((x) => x.engines));
        expect(all.filter((e) => e.state === 'ready')).toHaveLength(4);
        for (const e of all) expect(await generate(e.base_url as string)).toBe(200);
        expect(alive()).toHaveLength(4);
      } finally {
        await Promise.all(ms.map((m) => m.shutdown()));
      }
      expect(alive()).toEqual([]);
      expect(livePgs()).toEqual(['uis-actor']);
    } finally {
      cluster.python(
        `from ray.util.placement_group import get_placement_group, remove_placement_group\nremove_placement_group(get_placement_group("uis-actor"))`,
      );
    }
  });

  it('a TP engine spanning both nodes: two actors, one replica, only the head URL in discovery', async () => {
    const { plan, roles } = planConfig(config({ rollout: { mode: 'decoupled', gpus: 8, perEngine: 8 } }));
    const { ms } = managers(plan, roles, ['rollout']);
    const [m] = ms as [InferenceManager];
    try {
      await m.start();
      const es = engines(m.registry.snapshot(), 'policy');
      expect(es).toHaveLength(1);
      expect(m.snapshot().models.policy?.replicas[0]?.pids).toHaveLength(2);
      expect(
        alive()
          .map((a) => a.name.split('#')[0])
          .sort(),
      ).toEqual(['uis:policy/0/node0', 'uis:policy/0/node1']);
      expect(await generate(es[0]?.base_url as string)).toBe(200);
      const info = (await (await fetch(`${es[0]?.base_url}/server_info`)).json()) as Record<string, unknown>;
      expect([info.nnodes, info.node_rank, info.tp_size]).toEqual([2, 0, 8]);
    } finally {
      await m.shutdown();
    }
    expect(alive()).toEqual([]);
    expect(livePgs()).toEqual([]);
  });

  it('a bundle probe that contradicts the plan is rejected before any engine starts', async () => {
    // The external service spread its 2 bundles over both nodes; the plan needs one 2-GPU engine on one node.
    cluster.python(
      `from ray.util.placement_group import placement_group\n` +
        `pg = placement_group([{"GPU":1,"CPU":1}]*2, strategy="STRICT_SPREAD", name="ext-spread", lifetime="detached")\n` +
        `ray.get(pg.ready(), timeout=60)`,
    );
    try {
      const { plan, roles } = planConfig(
        config({
          teacher: { mode: 'decoupled', gpus: 2, perEngine: 2, pg_owner: 'external', pg_name: 'ext-spread' },
        }),
      );
      const { ms } = managers(plan, roles, ['teacher']);
      const [m] = ms as [InferenceManager];
      const err = await m.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isUisError(err) && err.code).toBe('start_failed');
      const cause = (err as UisError).cause;
      expect(cause instanceof UisError && cause.code).toBe('bundle_probe_rejected');
      const violations = ((cause as UisError).details as { violations: Array<{ code: string }> }).violations;
      expect(violations.length).toBeGreaterThan(0);
      expect(alive()).toEqual([]);
      expect(livePgs()).toEqual(['ext-spread']);
      await m.shutdown();
    } finally {
      cluster.python(
        `from ray.util.placement_group import get_placement_group, remove_placement_group\nremove_placement_group(get_placement_group("ext-spread"))`,
      );
    }
  });

  it('a crashed bridge leaves no PG or actor of ours behind (they belong to its Ray job)', async () => {
    const doomed = await RayBridge.start({ address: cluster.address, namespace: 'uis' });
    await doomed.createPg('crash-pg', [{ GPU: 1, CPU: 1 }], 'PACK');
    const p = await doomed.startProcess({
      pg: 'crash-pg',
      bundle_index: 0,
      num_gpus: 0.2,
      argv: [process.execPath, SIM_BIN, '--host', '127.0.0.1', '--port', '0'],
      env: {},
      label: 'crash',
    });
    expect(livePgs()).toContain('crash-pg');
    expect(alive('uis:crash')).toHaveLength(1);
    process.kill(doomed.pid as number, 'SIGKILL');
    await waitFor(
      () => (!livePgs().includes('crash-pg') && alive('uis:crash').length === 0 ? true : undefined),
      90_000,
      'Ray cleaned up after the dead driver',
    );
    // The engine process went with its actor.
    await waitFor(
      () => {
        try {
          process.kill(p.pid, 0);
          return undefined;
        } catch {
          return true;
        }
      },
      90_000,
      'engine process gone',
    );
  });

  it('a start that fails midway removes only our PG and actors', async () => {
    // Someone else's PG and actor, alive before and after.
    cluster.python(
      `from ray.util.placement_group import placement_group\n` +
        `pg = placement_group([{"GPU":1,"CPU":1}], strategy="PACK", name="ext-keep", lifetime="detached")\n` +
        `ray.get(pg.ready(), timeout=60)\n` +
        `@ray.remote(num_cpus=0)\nclass Keeper:\n    def ping(self): return 1\n` +
        `k = Keeper.options(name="controller-keeper", lifetime="detached").remote()\nray.get(k.ping.remote())`,
    );
    try {
      const { plan, roles } = planConfig(config({ rollout: { mode: 'decoupled', gpus: 4, perEngine: 2 } }));
      const pgs = new RayPlacementGroups(bridge, plan);
      const m = new InferenceManager({
        role: roles.rollout as InferenceRoleSpec,
        placements: plan.placements,
        pools: plan.pools,
        placementGroups: pgs,
        // policy/1 cannot start (an invalid flag makes the engine exit); policy/0 starts fine.
        launcher: new RayLauncher({
          bridge,
          placementGroups: pgs,
          command: [process.execPath, SIM_BIN],
          host: '127.0.0.1',
          pollMs: 100,
          extraArgs: (req) => (req.replica.replica === 1 ? ['--tp-size', '0'] : ['--sim-startup-ms', '1500']),
        }),
        options: OPTIONS,
      });
      const err = await m.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isUisError(err) && err.code).toBe('start_failed');
      expect((err as UisError).details).toMatchObject({ rolled_back: { pgs: ['uis-rollout'] } });
      expect(alive()).toEqual([]);
      expect(livePgs()).toEqual(['ext-keep']);
      expect(alive('controller-keeper')).toHaveLength(1);
      await m.shutdown();
    } finally {
      cluster.python(
        `from ray.util.placement_group import get_placement_group, remove_placement_group\n` +
          `remove_placement_group(get_placement_group("ext-keep"))\nray.kill(ray.get_actor("controller-keeper"))`,
      );
    }
  });
});
