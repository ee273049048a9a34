import { readdirSync, readFileSync } from 'node:fs';
import { createControlPlane } from '@uis/control-plane';
import type { Launcher } from '@uis/manager';
import { routedRolloutConfig, sglangRouterSkipReason } from '@uis/manager/testing';
import { DiscoverySnapshotSchema, ErrorBodySchema, parseConfig } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims } from '../testing/fixtures.ts';

const skip = sglangRouterSkipReason('router-mode');

/** The SGLang routers this process started (the router renames its process `sglang::router`). */
function childRouters(): number[] {
  return readdirSync('/proc').flatMap((e) => {
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const cmd = readFileSync(`/proc/${e}/cmdline`, 'utf8');
      return ppid === process.pid && /router/.test(cmd) ? [Number(e)] : [];
    } catch {
      return [];
    }
  });
}

/** One rollout model behind the real SGLang router (round robin), 2 sim engines of 1 GPU on the actor's GPUs.
 * Colocated with offload: sleeping releases the engines' memory, which the drain test checks. */
const routedConfig = () => parseConfig(routedRolloutConfig({ num_gpus: 2, gpus_per_engine: 1, tp: 1 }));

interface SimStats {
  requests: number;
  errors: number;
}

describe.skipIf(skip !== undefined)(
  'uis serve with route_mode sglang_router: gateway -> router -> engines',
  () => {
    const gw = gatewayOnSims({
      config: routedConfig(),
      sim: { simDecodeUsPerToken: 1000 },
      managerOptions: { healthIntervalMs: 500, startDeadlineMs: 60_000 },
      server: { adminToken: 'admin-token-for-tests' },
      startTimeoutMs: 120_000,
    });

    const discovery = async () =>
      DiscoverySnapshotSchema.parse(await (await fetch(`${gw.url}/rollout/engines`)).json());
    const engineUrls = async () =>
      ((await discovery()).models.policy?.engines ?? []).map((e) => e.base_url as string);
    const stats = async (u: string) => (await (await fetch(`${u}/sim/stats`)).json()) as SimStats;
    const post = async (path: string, body: unknown) => {
      const r = await fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: r.status, json: (await r.json()) as Record<string, unknown> };
    };
    const router = () => {
      const r = gw.plane.routerOf('rollout', 'policy');
      if (!r) throw new Error('the router of policy is not running');
      return r;
    };

    it('starts the router and publishes its URL; every ready replica is a router worker', async () => {
      const d = await discovery();
      expect(d.models.policy?.router_url).toBe(router().url);
      expect(d.models.policy?.router_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const urls = await engineUrls();
      expect(urls).toHaveLength(2);
      expect((await router().client.listWorkers()).map((w) => w.url).sort()).toEqual([...urls].sort());
    });

    it('serves /generate and chat through the router, reaching both engines', async () => {
      const urls = await engineUrls();
      const before = await Promise.all(urls.map(stats));
      const answers = await Promise.all([
        ...Array.from({ length: 6 }, () =>
          post('/rollout/generate', { text: 'hello router', sampling_params: { max_new_tokens: 4 } }),
        ),
        ...Array.from({ length: 4 }, () =>
          post('/rollout/v1/chat/completions', {
            messages: [{ role: 'user', content: 'hi' }],
            max_tokens: 4,
          }),
        ),
      ]);
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
      expect(typeof answers[0]?.json.text).toBe('string');
      expect(answers[9]?.json.choices).toHaveLength(1);
      const after = await Promise.all(urls.map(stats));
      const got = after.map((a, i) => a.requests - (before[i]?.requests ?? 0));
      expect(got.reduce((a, b) => a + b, 0)).toBe(10);
      expect(got.every((n) => n > 0)).toBe(true);
      expect(after.reduce((n, a, i) => n + a.errors - (before[i]?.errors ?? 0), 0)).toBe(0);
    });

    it('draining removes the workers from the router before the engines sleep; the gateway then answers 503', async () => {
      const manager = gw.plane.managers.get('rollout');
      if (!manager) throw new Error('no rollout manager');
      // Samples replica state first, then the router's workers: a worker still listed after its replica was seen
      // released was listed while the engine slept.
      const violations: string[] = [];
      let draining = true;
      const watch = (async () => {
        while (draining) {
          const released = (manager.snapshot().models.policy?.replicas ?? []).flatMap((r) =>
            r.memory_released && r.base_url ? [r.base_url] : [],
          );
          const listed = (await router().client.listWorkers()).map((w) => w.url);
          // Back to back: each sample waits for the router's answer, no guessed interval between them.
          for (const u of released) if (listed.includes(u)) violations.push(u);
        }
      })();
      await manager.drainModel('policy', { deadlineMs: 10_000 });
      draining = false;
      await watch;
      expect(violations).toEqual([]);
      expect(
        (manager.snapshot().models.policy?.replicas ?? []).map((r) => [r.state, r.memory_released]),
      ).toEqual([
        ['sleeping', true],
        ['sleeping', true],
      ]);
      expect(await router().client.listWorkers()).toEqual([]);
      const late = await post('/rollout/generate', {
        text: 'too late',
        sampling_params: { max_new_tokens: 4 },
      });
      expect(late.status).toBe(503);
      // The gateway refuses a sleeping model itself: nothing reaches the router or an engine.
      expect(ErrorBodySchema.parse(late.json).error.code).toBe('model_not_ready');
    });

    it('stop() stops the router process after the managers', async () => {
      const r = router();
      const pid = r.pid as number;
      await gw.server.close();
      await gw.plane.stop();
      expect(gw.plane.routerOf('rollout', 'policy')).toBeUndefined();
      expect(() => process.kill(pid, 0)).toThrow();
    });
  },
);

describe.skipIf(skip !== undefined)('ControlPlane router lifecycle on a failed start', () => {
  it('the router runs before any engine is created and is stopped when a manager fails to start', async () => {
    const seen: number[] = [];
    const failing: Launcher = {
      kind: 'failing',
      ownsProcesses: true,
      create: async () => {
        seen.push(...childRouters());
        throw new Error('no engine for you');
      },
    };
    await expect(createControlPlane({ config: routedConfig(), launcher: failing })).rejects.toThrow();
    expect(seen.length).toBeGreaterThan(0);
    for (const pid of seen) expect(() => process.kill(pid, 0)).toThrow();
  }, 120_000);
});
