import { createServer } from 'node:http';
import { SGLangClient, SGLangRouterClient } from '@uis/sglang-engine';
import { alive, ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { type DiscoverySnapshot, type InferenceRoleSpec, isUisError, type PlacementPlan } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { InferenceManager, type InferenceManagerInit, type RouterRegistrar } from './inference-manager.ts';
import { type LaunchRequest, SimLauncher } from './launchers.ts';
import { InMemoryPlacementGroups } from './placement-groups.ts';
import { MemoryLogger } from './runtime.ts';
import {
  layoutRole,
  outcomeCode,
  planConfig,
  splitConfig,
  startModelSim,
  twoNodeTeacherConfig,
} from './testing.ts';

const managers: InferenceManager[] = [];
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  await Promise.allSettled(managers.splice(0).map((m) => m.shutdown()));
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const FAST = {
  healthIntervalMs: 100,
  healthTimeoutMs: 2_000,
  failuresToDead: 2,
  restartBackoffMs: 100,
  startDeadlineMs: 60_000,
};

function manager(
  role: InferenceRoleSpec,
  plan: PlacementPlan,
  extra: Partial<InferenceManagerInit> = {},
): InferenceManager {
  const m = new InferenceManager({
    role,
    placements: plan.placements,
    pools: plan.pools,
    launcher: new SimLauncher(),
    options: FAST,
    ...extra,
  });
  managers.push(m);
  return m;
}

function pidsOf(m: InferenceManager): number[] {
  return Object.values(m.snapshot().models).flatMap((x) => x.replicas.flatMap((r) => r.pids));
}

/** Polls `fn` for a state that lasts (a replica ready again after a relaunch on a loaded machine can take a while);
 * a passing state is caught by `published` instead. */
const engines = (s: DiscoverySnapshot, model: string) => s.models[model]?.engines ?? [];

/** Resolves at the first snapshot (the current one or a later publication) that `pred` accepts, and runs `then`
 * inside that publication, before anything else moves: a state that lasts less than a poll interval is not
 * missed. */
function published<T = void>(
  m: InferenceManager,
  what: string,
  pred: (s: DiscoverySnapshot) => boolean,
  then: () => T = () => undefined as T,
  timeoutMs = 60_000,
): Promise<T> {
  if (pred(m.registry.snapshot())) return Promise.resolve(then());
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    const off = m.registry.subscribe((s) => {
      if (!pred(s)) return;
      off();
      clearTimeout(timer);
      resolve(then());
    });
  });
}

describe('InferenceManager against sglang-sim processes', () => {
  it('starts the split layout of all three roles, serves, and leaves no process behind', async () => {
    const { plan, roles } = planConfig(splitConfig());
    const pgs = new InMemoryPlacementGroups(['uis-actor']);
    const ms = (['rollout', 'genrm', 'teacher'] as const).map((r) =>
      manager(roles[r] as InferenceRoleSpec, plan, { placementGroups: pgs }),
    );
    await Promise.all(ms.map((m) => m.start()));
    const [rollout, genrm, teacher] = ms as [InferenceManager, InferenceManager, InferenceManager];
    expect(
      engines(rollout.registry.snapshot(), 'policy').map((e) => [e.engine_id, e.direct_eligible]),
    ).toEqual([
      ['policy/0', true],
      ['policy/1', true],
    ]);
    expect(engines(genrm.registry.snapshot(), 'judge')).toHaveLength(1);
    expect(engines(teacher.registry.snapshot(), 'teacher')).toHaveLength(1);
    const snap = rollout.registry.snapshot();
    expect(snap.schema_version).toBe(2);
    expect(snap.routing?.default_model).toBe('policy');
    expect(snap.models.policy?.served_model_name).toBe('policy');
    // Colocated: the controller owns the actor PG; the managers neither create nor delete it.
    expect(pgs.log).toEqual([]);
    const url = engines(teacher.registry.snapshot(), 'teacher')[0]?.base_url as string;
    const client = new SGLangClient(url);
    const out = await client.generate({
      input_ids: [5, 6, 7, 8],
      sampling_params: { max_new_tokens: 0 },
      return_logprob: true,
      logprob_start_len: 1,
    });
    await client.close();
    expect(out.meta_info.input_token_logprobs).toHaveLength(3);
    const pids = ms.flatMap(pidsOf);
    expect(pids).toHaveLength(4);
    await Promise.all(ms.map((m) => m.shutdown()));
    await Promise.all(ms.map((m) => m.shutdown())); // idempotent
    expect(pids.filter(alive)).toEqual([]);
    expect(pgs.live.has('uis-actor')).toBe(true);
    expect(engines(rollout.registry.snapshot(), 'policy').every((e) => e.state === 'dead')).toBe(true);
  });

  it('recovers a killed replica: published dead, revision moves, eligible only once weights match', async () => {
    const { plan, roles } = planConfig(splitConfig({ faultTolerance: true }));
    const m = manager(roles.rollout as InferenceRoleSpec, plan);
    await m.start();
    const upd = await m.updateWeights('policy', {
      source: 'disk',
      model_path: '/models/policy-step1',
      weight_version: 'v1',
    });
    expect(upd.engines.every((e) => e.ok && e.weight_version === 'v1')).toBe(true);
    const seen: DiscoverySnapshot[] = [];
    m.registry.subscribe((s) => seen.push(s));
    const before = m.registry.revision;
    const victim = m.snapshot().models.policy?.replicas[0];
    const pid = victim?.pids[0] as number;
    process.kill(pid, 'SIGKILL');
    const recovered = await waitFor(
      () => {
        const e = engines(m.registry.snapshot(), 'policy')[0];
        return e?.state === 'ready' && e.direct_eligible && e.generation === 1 ? e : undefined;
      },
      60_000,
      'recovery',
    );
    expect(recovered.weight_version).toBe('v1');
    expect(m.registry.revision).toBeGreaterThan(before);
    const states = seen.map((s) => engines(s, 'policy')[0]?.state);
    expect(states).toContain('dead');
    expect(states).toContain('starting');
    // Never eligible at a version other than the target.
    for (const s of seen)
      for (const e of engines(s, 'policy')) if (e.direct_eligible) expect(e.weight_version).toBe('v1');
    expect(alive(pid)).toBe(false);
    expect(m.snapshot().models.policy?.replicas[0]?.pids[0]).not.toBe(pid);
  });

  it('without fault tolerance a killed replica stays dead; its memory counts as released (its processes are gone)', async () => {
    const { plan, roles } = planConfig(splitConfig());
    const m = manager(roles.rollout as InferenceRoleSpec, plan);
    await m.start();
    process.kill(m.snapshot().models.policy?.replicas[1]?.pids[0] as number, 'SIGKILL');
    await waitFor(
      () => engines(m.registry.snapshot(), 'policy')[1]?.state === 'dead',
      60_000,
      'dead published',
    );
    const report = await m.drain();
    expect(report.engines).toEqual([
      { engine_id: 'policy/0', memory_released: true, state: 'sleeping' },
      { engine_id: 'policy/1', memory_released: true, state: 'dead' },
    ]);
    expect(report.memoryReleased).toBe(true);
    expect(m.registry.snapshot().models.policy?.state).toBe('sleeping');
  });

  it('a replica that dies while its model sleeps is restarted by the next onload, not next to the resident phase', async () => {
    const { plan, roles } = planConfig(splitConfig({ faultTolerance: true }));
    // Health checks and restart backoff run on a clock the test moves: "however long it waits" is an hour here.
    const clock = new ManualClock();
    const m = manager(roles.rollout as InferenceRoleSpec, plan, { clock });
    await m.start();
    await m.drain();
    const pid = m.snapshot().models.policy?.replicas[0]?.pids[0] as number;
    process.kill(pid, 'SIGKILL');
    await waitFor(
      () => engines(m.registry.snapshot(), 'policy')[0]?.state === 'dead',
      60_000,
      'dead published',
    );
    // What was left of the dead incarnation is cleaned up; an hour of health checks and backoff periods later it
    // is still dead: nothing was launched while the model sleeps.
    await waitFor(
      () => m.snapshot().models.policy?.replicas[0]?.pids.length === 0,
      60_000,
      'old incarnation cleaned up',
    );
    await clock.advance(3_600_000);
    expect(m.snapshot().models.policy?.replicas[0]).toMatchObject({
      state: 'dead',
      generation: 0,
      pids: [],
    });
    expect(alive(pid)).toBe(false);
    await m.activate();
    expect(
      engines(m.registry.snapshot(), 'policy').map((e) => [e.state, e.generation, e.direct_eligible]),
    ).toEqual([
      ['ready', 1, true],
      ['ready', 0, true],
    ]);
  });

  it('an engine that cannot release its memory is declared dead and stopped, so the drain still proves release', async () => {
    const { plan, roles } = planConfig(splitConfig());
    const sim = new SimLauncher();
    // Launched without the memory saver: release_memory_occupation fails on this engine.
    const noSaver = {
      kind: 'sim',
      ownsProcesses: true,
      create: (req: LaunchRequest) => sim.create({ ...req, offload: false }),
    };
    const m = manager(roles.rollout as InferenceRoleSpec, plan, { launcher: noSaver });
    await m.start();
    const pids = pidsOf(m);
    const report = await m.drain();
    expect(report.engines.map((e) => [e.state, e.memory_released])).toEqual([
      ['dead', true],
      ['dead', true],
    ]);
    expect(pids.filter(alive)).toEqual([]);
  });

  it('a drain during a recovery waits for it: the relaunched replica ends asleep with its memory released', async () => {
    const { plan, roles } = planConfig(splitConfig({ faultTolerance: true }));
    const m = manager(roles.rollout as InferenceRoleSpec, plan, {
      // Relaunched incarnations take a while to come up, so the drain lands in the middle of the recovery.
      launcher: new SimLauncher({
        extraArgs: (req) => (req.generation > 0 ? ['--sim-startup-ms', '1500'] : []),
      }),
    });
    await m.start();
    process.kill(m.snapshot().models.policy?.replicas[0]?.pids[0] as number, 'SIGKILL');
    await published(m, 'recovery launching', (s) => engines(s, 'policy')[0]?.state === 'starting');
    const report = await m.drain();
    expect(report.memoryReleased).toBe(true);
    expect(report.engines).toEqual([
      { engine_id: 'policy/0', memory_released: true, state: 'sleeping' },
      { engine_id: 'policy/1', memory_released: true, state: 'sleeping' },
    ]);
    expect(engines(m.registry.snapshot(), 'policy')[0]?.generation).toBe(1);
  });

  it('a hung replica fails its health checks, is published dead and restarted', async () => {
    const { plan, roles } = planConfig(splitConfig({ faultTolerance: true }));
    const m = manager(roles.rollout as InferenceRoleSpec, plan, {
      launcher: new SimLauncher({
        // Only the first incarnation of policy/0 hangs (after a few requests).
        extraArgs: (req) =>
          req.replica.replica === 0 && req.generation === 0 ? ['--sim-hang-after', '2'] : [],
      }),
      options: { ...FAST, healthTimeoutMs: 300 },
    });
    await m.start();
    // From before the hang: the health checks may declare it dead while the requests below still wait.
    const seen: string[] = [];
    m.registry.subscribe((snap) => seen.push(engines(snap, 'policy')[0]?.state ?? '?'));
    const url = engines(m.registry.snapshot(), 'policy')[0]?.base_url as string;
    const client = new SGLangClient(url);
    for (let i = 0; i < 4; i++)
      await client
        .generate({ text: `x${i}`, sampling_params: { max_new_tokens: 2 } }, { timeoutMs: 300 })
        .catch(() => undefined);
    await client.close();
    const back = await waitFor(
      () => {
        const e = engines(m.registry.snapshot(), 'policy')[0];
        return e?.state === 'ready' && e.generation === 1 ? e : undefined;
      },
      60_000,
      'restart after hang',
    );
    expect(back.direct_eligible).toBe(true);
    // The first move away from ready is the death, published before the restart.
    expect(seen.find((state) => state !== 'ready')).toBe('dead');
  });

  it('a recovered replica whose weights cannot be replayed (distributed) stays ineligible until the next update', async () => {
    const { plan, roles } = planConfig(splitConfig({ faultTolerance: true, rolloutSource: 'dcs' }));
    const m = manager(roles.rollout as InferenceRoleSpec, plan);
    await m.start();
    const init = await m.updateWeights('policy', {
      source: 'distributed',
      action: 'init',
      master_address: '127.0.0.1',
      master_port: 29500,
      world_size: 5,
    });
    expect(init.engines.map((e) => e.ok)).toEqual([true, true]);
    const tensors = { names: ['w'], dtypes: ['bfloat16'], shapes: [[2, 2]] };
    await m.updateWeights('policy', {
      source: 'distributed',
      action: 'update',
      weight_version: 'v7',
      ...tensors,
    });
    process.kill(m.snapshot().models.policy?.replicas[1]?.pids[0] as number, 'SIGKILL');
    const back = await waitFor(
      () => {
        const e = engines(m.registry.snapshot(), 'policy')[1];
        return e?.state === 'ready' && e.generation === 1 ? e : undefined;
      },
      60_000,
      'restart',
    );
    expect(back.direct_eligible).toBe(false);
    expect(back.weight_version).not.toBe('v7');
    expect(m.eligibleEngines('policy').map((e) => e.engineId)).toEqual(['policy/0']);
    expect(await outcomeCode(async () => m.inFlight.acquire('policy/1'))).toBe('replica_not_admitting');
    await m.updateWeights('policy', {
      source: 'distributed',
      action: 'init',
      master_address: '127.0.0.1',
      master_port: 29501,
      world_size: 5,
    });
    await m.updateWeights('policy', {
      source: 'distributed',
      action: 'update',
      weight_version: 'v8',
      ...tensors,
    });
    expect(
      engines(m.registry.snapshot(), 'policy').map((e) => [e.weight_version, e.direct_eligible]),
    ).toEqual([
      ['v8', true],
      ['v8', true],
    ]);
    const destroyed = await m.updateWeights('policy', { source: 'distributed', action: 'destroy' });
    expect(destroyed.engines.map((e) => e.ok)).toEqual([true, true]);
    expect(destroyed.weight_version).toBe('v8');
    // Without a group, an update fails on every engine and the target does not move.
    const orphan = await m
      .updateWeights('policy', { source: 'distributed', action: 'update', weight_version: 'v9', ...tensors })
      .catch((e: unknown) => e);
    expect(isUisError(orphan) && orphan.code).toBe('weight_update_failed');
    expect(m.registry.snapshot().models.policy?.weight_version).toBe('v8');
    expect(m.eligibleEngines('policy')).toHaveLength(2);
  });

  it('drains under load: accepted requests all finish, new ones are refused with 503, memory is released', async () => {
    const { plan, roles } = planConfig(splitConfig());
    const m = manager(roles.rollout as InferenceRoleSpec, plan, {
      launcher: new SimLauncher({ simArgs: ['--sim-decode-us-per-token', '20000'] }),
    });
    await m.start();
    const targets = m.eligibleEngines('policy');
    const clients = targets.map((t) => new SGLangClient(t.baseUrl));
    cleanups.push(async () => {
      await Promise.all(clients.map((c) => c.close()));
    });
    const send = (i: number) => {
      const t = targets[i % targets.length] as (typeof targets)[number];
      const release = m.inFlight.acquire(t.engineId);
      return (clients[i % clients.length] as SGLangClient)
        .generate({ text: `request ${i}`, sampling_params: { max_new_tokens: 20, ignore_eos: true } })
        .finally(release);
    };
    const accepted = Array.from({ length: 8 }, (_, i) => send(i));
    // The drain starts once the engines hold all eight (their load, read as the drain reads it: /get_load, or
    // /v1/loads on releases without it; num_reqs counts the waiting ones too), not after a guessed time.
    const running = async () => {
      const loads = await Promise.all(clients.map((c) => c.load()));
      return loads.flat().reduce((n, l) => n + l.num_reqs, 0) === 8;
    };
    await waitFor(running, 30_000, 'the engines running the 8 accepted requests');
    // A request sent as the draining is published is refused (a poll could miss a drain that ends quickly).
    const refused = published(
      m,
      'draining published',
      (s) => engines(s, 'policy').every((e) => e.state === 'draining' && !e.direct_eligible),
      () => outcomeCode(async () => send(99)),
    );
    const drained = m.drain({ policy: 'wait', deadlineMs: 60_000 });
    expect(await refused).toBe('replica_not_admitting');
    const results = await Promise.all(accepted);
    expect(results.map((r) => r.meta_info.completion_tokens)).toEqual(Array(8).fill(20));
    expect(results.every((r) => r.meta_info.finish_reason?.type === 'length')).toBe(true);
    const report = await drained;
    expect(report.memoryReleased).toBe(true);
    expect(report.engines.map((e) => e.state)).toEqual(['sleeping', 'sleeping']);
    expect(m.registry.snapshot().models.policy?.state).toBe('sleeping');
  });

  it('concurrent activate/drain calls: same calls join, order is kept, no illegal transition', async () => {
    const { plan, roles } = planConfig(splitConfig());
    const logger = new MemoryLogger();
    const m = manager(roles.rollout as InferenceRoleSpec, plan, { logger });
    await m.start();
    const d1 = m.drain();
    const d2 = m.drain();
    expect(d2).toBe(d1);
    const a1 = m.activate();
    const a2 = m.activate();
    expect(a2).toBe(a1);
    const d3 = m.deactivate();
    await Promise.all([d1, a1, d3]);
    expect(engines(m.registry.snapshot(), 'policy').map((e) => e.state)).toEqual(['sleeping', 'sleeping']);
    await Promise.all([m.activate(), m.activate(['weights', 'kv_cache', 'cuda_graph'])]);
    expect(engines(m.registry.snapshot(), 'policy').map((e) => e.state)).toEqual(['ready', 'ready']);
    expect(logger.lines.filter((l) => l.msg?.includes('illegal'))).toEqual([]);
    // Activating a ready model is a no-op that does not move the revision.
    const rev = m.registry.revision;
    await m.activate();
    expect(m.registry.revision).toBe(rev);
  });

  it('onload by tags: weights first (synced to the target), then the KV cache makes the replica ready', async () => {
    const { plan, roles } = planConfig(splitConfig());
    const m = manager(roles.rollout as InferenceRoleSpec, plan);
    await m.start();
    await m.drain();
    await m.updateWeights('policy', {
      source: 'disk',
      model_path: '/models/policy-step2',
      weight_version: 'v2',
    });
    expect(engines(m.registry.snapshot(), 'policy').map((e) => [e.state, e.weight_version])).toEqual([
      ['sleeping', 'default'],
      ['sleeping', 'default'],
    ]);
    await m.activate(['weights']);
    expect(engines(m.registry.snapshot(), 'policy').map((e) => [e.state, e.weight_version])).toEqual([
      ['onloading', 'v2'],
      ['onloading', 'v2'],
    ]);
    // A drain of the half-onloaded replicas releases the weights they hold and nothing else (SGLang, and the
    // simulator, kill an engine asked to release memory that is already released): same processes, released.
    const pids = m.snapshot().models.policy?.replicas.map((r) => r.pids);
    expect((await m.drain()).memoryReleased).toBe(true);
    expect(m.snapshot().models.policy?.replicas.map((r) => [r.memory_released, r.pids])).toEqual(
      pids?.map((p) => [true, p]),
    );
    await m.activate(['weights']);
    await m.activate(['kv_cache', 'cuda_graph']);
    expect(engines(m.registry.snapshot(), 'policy').map((e) => [e.state, e.direct_eligible])).toEqual([
      ['ready', true],
      ['ready', true],
    ]);
  });

  it('static models refuse weight updates and DCS registration', async () => {
    const { plan, roles } = planConfig(splitConfig());
    const m = manager(roles.genrm as InferenceRoleSpec, plan);
    await m.start();
    const err = await outcomeCode(
      m.updateWeights('judge', { source: 'disk', model_path: '/x', weight_version: 'v2' }),
    );
    expect(err).toBe('static_model');
    expect(await outcomeCode(async () => m.registerDcs('judge'))).toBe('static_model');
    expect(await outcomeCode(m.updateWeights('nope', { source: 'version', weight_version: 'v2' }))).toBe(
      'unknown_model',
    );
    const judge = roles.genrm?.models[0];
    const bad = {
      ...(roles.genrm as InferenceRoleSpec),
      models: [{ ...judge, register_dcs: true }],
    } as InferenceRoleSpec;
    expect(await outcomeCode(() => manager(bad, plan))).toBe('static_model_dcs');
  });
});

describe('ownership, rollback, router and elastic scale', () => {
  function decoupled(opts: { elastic?: boolean; router?: boolean } = {}) {
    return {
      cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
      training: { actor_gpus: 0 },
      roles: {
        rollout: layoutRole(
          'decoupled',
          {
            name: 'policy',
            weight_source: 'disk',
            elastic_enabled: opts.elastic ?? false,
            route_mode: opts.router ? 'sglang_router' : 'direct',
            engine_groups: [
              { num_gpus: 4, gpus_per_engine: 2 },
              ...(opts.elastic ? [{ worker_type: 'placeholder', num_gpus: 4, gpus_per_engine: 2 }] : []),
            ],
          },
          { routing: {} },
        ),
      },
    };
  }

  it("an operator's drain holds the model asleep across role-wide activations until the model is activated", async () => {
    const { plan, roles } = planConfig(decoupled());
    const m = manager(roles.rollout as InferenceRoleSpec, plan);
    await m.start();
    await m.drainModel('policy');
    const held = () => m.registry.snapshot().models.policy;
    expect(held()).toMatchObject({ state: 'sleeping', held: true });
    // A phase change onloads the role: the held model stays asleep, out of discovery.
    await m.activate();
    expect(held()).toMatchObject({ state: 'sleeping', held: true });
    expect(m.snapshot().models.policy?.held).toBe(true);
    expect(m.eligibleEngines('policy')).toEqual([]);
    // A phase change that puts the role to sleep and wakes it again does not lift the hold either.
    await m.drain();
    await m.activate();
    expect(held()?.state).toBe('sleeping');
    // The operator's activation lifts it; later role-wide drains and activations apply again.
    await m.activateModel('policy');
    expect(held()?.state).toBe('ready');
    expect(held()?.held).toBeUndefined();
    await m.drain();
    await m.activate();
    expect(held()?.state).toBe('ready');
  });

  it('a failed start rolls back exactly what it created (engines, router entries, its PG) and nothing else', async () => {
    const { plan, roles } = planConfig(decoupled({ router: true }));
    const pool = Object.values(plan.pools)[0];
    expect(pool?.owner).toBe('manager');
    const pgs = new InMemoryPlacementGroups(['someone-elses-pg']);
    const router = new FakeRouter();
    let launched = 0;
    const m = manager(roles.rollout as InferenceRoleSpec, plan, {
      placementGroups: pgs,
      routers: { policy: router },
      // Replica 1 gets a flag value the engine rejects: it exits during start.
      launcher: new SimLauncher({
        extraArgs: (req) => {
          launched++;
          return req.replica.replica === 1 ? ['--sim-error-rate', 'not-a-number'] : [];
        },
      }),
    });
    const err = await m.start().catch((e: unknown) => e);
    expect(isUisError(err) && err.code).toBe('start_failed');
    expect(launched).toBe(2);
    expect(pgs.log).toEqual([
      { op: 'create', pg: pool?.pg_name },
      { op: 'remove', pg: pool?.pg_name },
    ]);
    expect([...pgs.live]).toEqual(['someone-elses-pg']);
    expect(router.workers.size).toBe(0);
    expect(engines(m.registry.snapshot(), 'policy')).toEqual([]);
    expect(m.snapshot().models.policy?.replicas).toEqual([]);
  });

  it('router mode: replicas are registered while eligible and removed when draining', async () => {
    const { plan, roles } = planConfig(decoupled({ router: true }));
    const router = new FakeRouter();
    const pgs = new InMemoryPlacementGroups();
    const m = manager(roles.rollout as InferenceRoleSpec, plan, {
      routers: { policy: router },
      placementGroups: pgs,
      options: { ...FAST, routerUrls: { policy: 'http://127.0.0.1:30000' } },
    });
    await m.start();
    const urls = engines(m.registry.snapshot(), 'policy').map((e) => e.base_url);
    expect([...router.workers].sort()).toEqual([...urls].sort());
    expect(m.registry.snapshot().models.policy?.router_url).toBe('http://127.0.0.1:30000');
    await m.drain();
    expect(router.workers.size).toBe(0);
    await m.activate();
    expect(router.workers.size).toBe(2);
    await m.shutdown();
    expect(router.workers.size).toBe(0);
    // Decoupled + managed: the manager created its PG and deletes it.
    expect(pgs.log.map((l) => l.op)).toEqual(['create', 'remove']);
  });

  it('elastic scale adds replicas on reserved bundles and drains before removing', async () => {
    const { plan, roles } = planConfig(decoupled({ elastic: true }));
    const m = manager(roles.rollout as InferenceRoleSpec, plan);
    await m.start();
    expect(engines(m.registry.snapshot(), 'policy')).toHaveLength(2);
    const seen: string[][] = [];
    m.registry.subscribe((s) => seen.push(engines(s, 'policy').map((e) => `${e.engine_id}:${e.state}`)));
    await m.scale('policy', 4);
    const after = engines(m.registry.snapshot(), 'policy');
    expect(after.map((e) => [e.engine_id, e.state, e.direct_eligible])).toEqual([
      ['policy/0', 'ready', true],
      ['policy/1', 'ready', true],
      ['policy/2', 'ready', true],
      ['policy/3', 'ready', true],
    ]);
    // The new replicas join prechecked and synced, both in one topology revision; none is published before.
    expect(seen).toEqual([['policy/0:ready', 'policy/1:ready', 'policy/2:ready', 'policy/3:ready']]);
    expect(await outcomeCode(m.scale('policy', 5))).toBe('no_reserved_bundles');
    const pid3 = m.snapshot().models.policy?.replicas[3]?.pids[0] as number;
    seen.length = 0;
    await m.scale('policy', 3);
    expect(seen[0]).toContain('policy/3:draining');
    expect(engines(m.registry.snapshot(), 'policy').map((e) => e.engine_id)).toEqual([
      'policy/0',
      'policy/1',
      'policy/2',
    ]);
    expect(alive(pid3)).toBe(false);
    const { plan: p2, roles: r2 } = planConfig(decoupled());
    const fixed = manager(r2.rollout as InferenceRoleSpec, p2);
    expect(await outcomeCode(fixed.scale('policy', 3))).toBe('not_elastic');
  });

  it('router mode with the real SGLangRouterClient against an HTTP router speaking /workers', async () => {
    const workers = new Map<string, { id: string; url: string; worker_type: string }>();
    let n = 0;
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString();
      });
      req.on('end', () => {
        const send = (status: number, value: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(value));
        };
        if (req.method === 'POST' && req.url === '/workers') {
          const w = JSON.parse(body) as { url: string; worker_type?: string };
          const id = `w-${++n}`;
          workers.set(id, { id, url: w.url, worker_type: w.worker_type ?? 'regular' });
          return send(202, { status: 'accepted', worker_id: id, url: w.url });
        }
        if (req.method === 'GET' && req.url === '/workers')
          return send(200, { workers: [...workers.values()] });
        if (req.method === 'DELETE' && req.url?.startsWith('/workers/')) {
          const id = decodeURIComponent(req.url.slice('/workers/'.length));
          return workers.delete(id)
            ? send(202, { status: 'accepted' })
            : send(404, { error: 'no such worker' });
        }
        send(404, { error: 'not found' });
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
    const address = server.address();
    const routerUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    const client = new SGLangRouterClient(routerUrl);
    cleanups.push(() => client.close());
    const { plan, roles } = planConfig(decoupled({ router: true }));
    const m = manager(roles.rollout as InferenceRoleSpec, plan, {
      routers: { policy: client },
      options: { ...FAST, routerUrls: { policy: routerUrl } },
    });
    await m.start();
    const urls = engines(m.registry.snapshot(), 'policy').map((e) => e.base_url);
    expect([...workers.values()].map((w) => w.url).sort()).toEqual([...urls].sort());
    await m.drainModel('policy');
    expect(workers.size).toBe(0);
    await m.activateModel('policy');
    expect(workers.size).toBe(2);
    await m.shutdown();
    expect(workers.size).toBe(0);
  });

  it('a router failure during start removes the registrations already made and stops the engines', async () => {
    const { plan, roles } = planConfig(decoupled({ router: true }));
    const router = new FakeRouter();
    router.failOnAdd = 2;
    const m = manager(roles.rollout as InferenceRoleSpec, plan, { routers: { policy: router } });
    const err = await m.start().catch((e: unknown) => e);
    expect(isUisError(err) && err.code).toBe('start_failed');
    expect(router.workers.size).toBe(0);
    const rolled =
      (isUisError(err) && (err.details as { rolled_back: { engines: string[] } }).rolled_back) || null;
    expect(rolled?.engines).toEqual(['policy/0', 'policy/1']);
    expect(m.snapshot().models.policy?.replicas).toEqual([]);
  });

  it('PD workers are listed with their worker type, registered with the router, never direct_eligible', async () => {
    const { plan, roles } = planConfig({
      cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
      training: { actor_gpus: 0 },
      roles: {
        rollout: layoutRole('decoupled', {
          name: 'policy',
          weight_source: 'disk',
          route_mode: 'sglang_router',
          engine_groups: [
            { worker_type: 'prefill', num_gpus: 2, gpus_per_engine: 2 },
            { worker_type: 'decode', num_gpus: 2, gpus_per_engine: 2 },
          ],
        }),
      },
    });
    const router = new FakeRouter();
    const m = manager(roles.rollout as InferenceRoleSpec, plan, { routers: { policy: router } });
    await m.start();
    const es = engines(m.registry.snapshot(), 'policy');
    expect(es.map((e) => [e.engine_id, e.worker_type, e.state, e.direct_eligible])).toEqual([
      ['policy/0', 'prefill', 'ready', false],
      ['policy/1', 'decode', 'ready', false],
    ]);
    expect(es.map((e) => router.types.get(e.base_url as string))).toEqual(['prefill', 'decode']);
    expect(m.eligibleEngines('policy')).toEqual([]);
  });

  it('a multi-node TP engine is one replica: two processes, the head URL only', async () => {
    const { plan, roles } = planConfig(twoNodeTeacherConfig());
    const m = manager(roles.teacher as InferenceRoleSpec, plan);
    await m.start();
    const es = engines(m.registry.snapshot(), 'teacher');
    expect(es).toHaveLength(1);
    expect(es[0]?.direct_eligible).toBe(true);
    const pids = pidsOf(m);
    expect(pids).toHaveLength(2);
    await m.shutdown();
    expect(pids.filter(alive)).toEqual([]);
  });

  it('external engines are attached by URL, health-checked, published, and never killed', async () => {
    const sim = await startModelSim('policy');
    cleanups.push(() => sim.close());
    const { plan, roles } = planConfig(decoupled());
    const m = manager(roles.rollout as InferenceRoleSpec, plan);
    await m.start();
    const { engine_id } = await m.registerExternal('policy', sim.url);
    expect(engine_id).toBe('policy/2');
    const e = engines(m.registry.snapshot(), 'policy').find((x) => x.engine_id === engine_id);
    expect(e?.direct_eligible).toBe(true);
    expect(await outcomeCode(m.unregisterExternal('policy/0'))).toBe('not_external');
    expect(await outcomeCode(m.registerExternal('policy', 'ftp://10.0.0.1:21'))).toBe('invalid_url');
    expect(await outcomeCode(m.registerExternal('policy', 'http://user:pw@10.0.0.1:1'))).toBe('invalid_url');
    await m.unregisterExternal(engine_id);
    expect(engines(m.registry.snapshot(), 'policy').map((x) => x.engine_id)).toEqual([
      'policy/0',
      'policy/1',
    ]);
    await m.registerExternal('policy', sim.url);
    await m.shutdown();
    const client = new SGLangClient(sim.url);
    expect(await client.health()).toBe(true);
    await client.close();
  });
});

/** A router that speaks the `/workers` API enough for the manager, in memory. */
class FakeRouter implements RouterRegistrar {
  readonly workers = new Set<string>();
  readonly types = new Map<string, string>();
  /** Fail the n-th addWorker call (1-based). */
  failOnAdd = 0;
  private adds = 0;
  async addWorker(req: { url: string; worker_type?: string }): Promise<unknown> {
    if (++this.adds === this.failOnAdd) throw new Error('router answered 500');
    this.workers.add(req.url);
    this.types.set(req.url, req.worker_type ?? 'regular');
    return { api: 'workers' };
  }
  async removeWorker(url: string): Promise<void> {
    this.workers.delete(url);
  }
}
