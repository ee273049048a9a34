import { layoutRole } from '@uis/manager/testing';
import { waitFor } from '@uis/sglang-engine/testing';
import { parseConfig } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims } from '../testing/fixtures.ts';

const TOKEN = 'model-load-admin';
// An elastic policy of 2 metered engines (room for 2 more); one running request per engine and slow decoding, so
// a few requests queue; engines take 1.5 s to start, so a scale-out is seen under way.
const gw = gatewayOnSims({
  config: parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 4 }] },
    roles: {
      rollout: layoutRole('decoupled', {
        name: 'policy',
        weight_source: 'disk',
        elastic_enabled: true,
        engine_groups: [
          { num_gpus: 2, gpus_per_engine: 1, server_args: { enable_metrics: true } },
          { worker_type: 'placeholder', num_gpus: 2, gpus_per_engine: 1 },
        ],
      }),
    },
  }),
  server: { adminToken: TOKEN },
  sim: { simMaxRunningRequests: 1, simDecodeUsPerToken: 20_000, simStartupMs: 1500 },
});

/** Each `uis_model_*` series of the policy model on a fresh scrape. */
async function scrape(): Promise<Record<string, number>> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^uis_model_(\w+)\{role="rollout",model="policy"\} (\S+)$/gm))
    out[m[1] as string] = Number(m[2]);
  return out;
}

describe('/metrics for KEDA and HPA: per role and model', { timeout: 90_000 }, () => {
  it("exports the engines' queue, running requests and KV use, and current and desired replicas, as they move", async () => {
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    expect(text).toContain('# TYPE uis_model_queue_requests gauge');
    expect(await scrape()).toEqual({
      queue_requests: 0,
      running_requests: 0,
      token_usage: 0,
      metrics_replicas: 2,
      replicas_current: 2,
      replicas_desired: 2,
    });
    // Six requests on two engines that run one each: four wait.
    const body = JSON.stringify({ text: 'load', sampling_params: { max_new_tokens: 60, ignore_eos: true } });
    const burst = Array.from({ length: 6 }, () =>
      fetch(`${gw.url}/rollout/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      }),
    );
    const busy = await waitFor(
      async () => {
        const m = await scrape();
        return (m.queue_requests ?? 0) >= 2 && m.running_requests === 2 ? m : undefined;
      },
      30_000,
      'requests queued on the engines',
    );
    expect(busy.token_usage).toBeGreaterThan(0);
    for (const r of await Promise.all(burst)) expect(r.status).toBe(200);
    await waitFor(async () => (await scrape()).queue_requests === 0, 30_000, 'the queue drained');

    // A scale-out under way: desired is its target while current is still the old count, then both are 3.
    const out = await fetch(`${gw.url}/admin/roles/rollout/scale_out`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ num_replicas: 3 }),
    });
    expect(out.status).toBe(200);
    const during = await waitFor(
      async () => {
        const m = await scrape();
        return m.replicas_desired === 3 ? m : undefined;
      },
      30_000,
      'desired 3',
    );
    expect(during.replicas_current).toBe(2);
    const after = await waitFor(
      async () => {
        const m = await scrape();
        return m.replicas_current === 3 ? m : undefined;
      },
      30_000,
      'current 3',
    );
    expect(after).toMatchObject({ replicas_desired: 3, metrics_replicas: 3 });
  });
});
