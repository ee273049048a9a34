import { layoutRole } from '@uis/manager/testing';
import { type SimServer, startSimServer } from '@uis/sglang-sim';
import { parseConfig } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from '../testing/fixtures.ts';

const sims: SimServer[] = [];
beforeAll(async () => {
  for (const modelPath of ['/models/policy', '/models/policy', '/models/teacher'])
    sims.push(await startSimServer({ port: 0, modelPath }));
});
afterAll(async () => {
  await Promise.allSettled(sims.map((s) => s.close()));
});

describe('engines started elsewhere', { timeout: 60_000 }, () => {
  it('serves planned replicas attached by the external launcher and a role given only engine URLs', async () => {
    const config = parseConfig({
      cluster: { nodes: [{ name: 'node-0', gpus: 2 }] },
      gateway: {
        launcher: 'external',
        external_urls: { 'policy/0': sims[0]!.url, 'policy/1': sims[1]!.url },
      },
      roles: {
        rollout: layoutRole('decoupled', {
          name: 'policy',
          weight_source: 'disk',
          engine_groups: [{ num_gpus: 2, gpus_per_engine: 1 }],
        }),
        teacher: layoutRole(
          'decoupled',
          {
            name: 'math-teacher',
            model_path: '/models/teacher',
            weight_source: 'static',
            engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }],
          },
          { external_engine_urls: [sims[2]!.url] },
        ),
      },
    });
    const gateway = await startGateway({
      config,
      launcher: config.gateway?.launcher ?? 'sim',
      server: { adminToken: 'external-admin' },
    });
    try {
      const { url } = gateway;
      const rollout = (await (await fetch(`${url}/rollout/engines`)).json()) as {
        models: { policy: { engines: Array<{ base_url: string; state: string }> } };
      };
      expect(rollout.models.policy.engines.map((e) => [e.base_url, e.state])).toEqual([
        [sims[0]!.url, 'ready'],
        [sims[1]!.url, 'ready'],
      ]);
      const teacher = (await (await fetch(`${url}/teacher/engines`)).json()) as {
        models: { 'math-teacher': { engines: Array<{ base_url: string }> } };
      };
      expect(teacher.models['math-teacher'].engines.map((e) => e.base_url)).toEqual([sims[2]!.url]);
      for (const role of ['rollout', 'teacher']) {
        const r = await fetch(`${url}/${role}/generate`, {
          method: 'POST',
          body: JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 2 } }),
        });
        expect(r.status).toBe(200);
      }
    } finally {
      await gateway.close();
    }
    // The manager never stops engines it did not start.
    for (const s of sims) expect((await fetch(`${s.url}/health`)).status).toBe(200);
  });
});
