import { waitFor } from '@uis/sglang-engine/testing';
import type { InferenceRoleSpec } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceManager, type RouterRegistrar } from '../inference-manager.ts';
import { SimLauncher } from '../launchers.ts';
import { InMemoryPlacementGroups } from '../placement-groups.ts';
import { planConfig, routedRolloutConfig, sglangRouterSkipReason } from '../testing.ts';
import { startModelRouters } from './model-routers.ts';
import { routerArgv, SGLangRouterProcess } from './sglang-router-process.ts';

const skip = sglangRouterSkipReason('sglang-router');

/** Rollout on 4 GPUs of the controller's actor PG, 2 engines, behind the real router (round robin). */
const routedConfig = () => routedRolloutConfig({ num_gpus: 4, gpus_per_engine: 2 });

interface SimStats {
  requests: number;
  completed: number;
  errors: number;
}
const stats = async (url: string): Promise<SimStats> =>
  (await (await fetch(`${url}/sim/stats`)).json()) as SimStats;

async function generate(url: string): Promise<number> {
  const res = await fetch(`${url}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ text: 'hello router', sampling_params: { max_new_tokens: 4 } }),
  });
  await res.text();
  return res.status;
}

describe('routerArgv', () => {
  it('takes policy and args from the spec, sets host/port/metrics itself, refuses to be overridden', () => {
    expect(
      routerArgv(
        { policy: 'power_of_two', args: { request_timeout_secs: 30, disable_retries: true, x: false } },
        '127.0.0.1',
        1,
        2,
      ),
    ).toEqual([
      '-m',
      'sglang_router.launch_router',
      '--host',
      '127.0.0.1',
      '--port',
      '1',
      '--policy',
      'power_of_two',
      '--prometheus-host',
      '127.0.0.1',
      '--prometheus-port',
      '2',
      '--request-timeout-secs',
      '30',
      '--disable-retries',
    ]);
    expect(() => routerArgv({ args: { port: 5 } }, '127.0.0.1', 1, 2)).toThrow(/set by the manager/);
  });
});

describe.skipIf(skip !== undefined)('the real sglang-router in front of sim engines', () => {
  let router: SGLangRouterProcess;
  let manager: InferenceManager;
  const removals: Array<{ url: string; state: string | undefined; released: boolean | undefined }> = [];

  beforeAll(async () => {
    const { plan, roles } = planConfig(routedConfig());
    const role = roles.rollout as InferenceRoleSpec;
    router = await SGLangRouterProcess.forModel(role.models[0] as InferenceRoleSpec['models'][number]);
    // Records, at the moment the router confirms a worker gone, where that replica was in its lifecycle.
    const observed: RouterRegistrar = {
      addWorker: (req) => router.registrar.addWorker(req),
      removeWorker: async (url) => {
        await router.registrar.removeWorker(url);
        const r = manager.snapshot().models.policy?.replicas.find((x) => x.base_url === url);
        removals.push({ url, state: r?.state, released: r?.memory_released });
      },
    };
    manager = new InferenceManager({
      role,
      placements: plan.placements,
      pools: plan.pools,
      placementGroups: new InMemoryPlacementGroups(['uis-actor']),
      launcher: new SimLauncher(),
      routers: { policy: observed },
      options: { routerUrls: { policy: router.url }, healthIntervalMs: 500, startDeadlineMs: 60_000 },
    });
    await manager.start();
  }, 120_000);

  afterAll(async () => {
    await manager?.shutdown();
    await router?.stop();
  });

  const engineUrls = () =>
    (manager.registry.snapshot().models.policy?.engines ?? []).map((e) => e.base_url as string);

  it('publishes the router URL and registers every ready replica with it', async () => {
    expect(manager.registry.snapshot().models.policy?.router_url).toBe(router.url);
    const workers = await router.client.listWorkers();
    expect(workers.map((w) => w.url).sort()).toEqual(engineUrls().sort());
    expect(workers.every((w) => w.is_healthy)).toBe(true);
  });

  it('requests flow client -> router -> engines, spread by the router policy', async () => {
    const before = await Promise.all(engineUrls().map(stats));
    const codes = await Promise.all(Array.from({ length: 10 }, () => generate(router.url)));
    expect(codes.every((c) => c === 200)).toBe(true);
    const after = await Promise.all(engineUrls().map(stats));
    const got = after.map((a, i) => a.requests - (before[i]?.requests ?? 0));
    expect(got.reduce((a, b) => a + b, 0)).toBe(10);
    expect(got.every((n) => n > 0)).toBe(true);
  });

  it('draining unregisters workers before they sleep; no request reaches a sleeping engine', async () => {
    const urls = engineUrls();
    const before = await Promise.all(urls.map(stats));
    // Traffic keeps coming through the router while the model drains and sleeps.
    let stop = false;
    const answers: number[] = [];
    const traffic = (async () => {
      while (!stop) answers.push(await generate(router.url));
    })();
    // Drain once traffic is flowing (a fixed 200 ms sleep could drain before any request was answered, and the
    // test asserts some were).
    await waitFor(() => answers.includes(200), 60_000, 'a request answered through the router');
    await manager.drainModel('policy', { deadlineMs: 10_000 });
    const sleeping = manager.snapshot().models.policy?.replicas ?? [];
    expect(sleeping.map((r) => [r.state, r.memory_released])).toEqual([
      ['sleeping', true],
      ['sleeping', true],
    ]);
    // Each worker left the router while its replica was still draining with memory resident.
    expect(removals.map((r) => r.url).sort()).toEqual([...urls].sort());
    for (const r of removals) expect([r.state, r.released]).toEqual(['draining', false]);
    expect(await router.client.listWorkers()).toEqual([]);
    // Requests after sleep are answered by the router (no worker), never by an engine.
    const late = await Promise.all(Array.from({ length: 5 }, () => generate(router.url)));
    stop = true;
    await traffic;
    expect(late.every((c) => c === 503)).toBe(true);
    const after = await Promise.all(urls.map(stats));
    const reached = after.reduce((n, a, i) => n + a.requests - (before[i]?.requests ?? 0), 0);
    // Every request an engine received was served (none hit released memory), and those are exactly the 200s.
    expect(after.reduce((n, a, i) => n + a.errors - (before[i]?.errors ?? 0), 0)).toBe(0);
    expect(reached).toBe(answers.filter((c) => c === 200).length);
    expect(answers.every((c) => c === 200 || c === 503)).toBe(true);
    expect(answers.filter((c) => c === 200).length).toBeGreaterThan(0);

    // Waking the model registers the workers again and traffic flows.
    await manager.activateModel('policy');
    expect((await router.client.listWorkers()).map((w) => w.url).sort()).toEqual([...urls].sort());
    expect(await generate(router.url)).toBe(200);
  });
});

describe.skipIf(skip !== undefined)('startModelRouters', () => {
  it('starts one router per sglang_router model of a role, none for direct models, and stops them', async () => {
    const role = planConfig(routedConfig()).roles.rollout as InferenceRoleSpec;
    const both: InferenceRoleSpec = {
      ...role,
      models: [
        ...role.models,
        { ...(role.models[0] as InferenceRoleSpec['models'][number]), name: 'other', route_mode: 'direct' },
      ],
    };
    const r = await startModelRouters(both);
    try {
      expect(Object.keys(r.routerUrls)).toEqual(['policy']);
      const res = await fetch(`${r.routerUrls.policy}/workers`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { workers: unknown[] }).workers).toEqual([]);
    } finally {
      await r.stop();
    }
    await expect(fetch(`${r.routerUrls.policy}/liveness`)).rejects.toThrow();
  });
});
