import { answerVersionSpans, DirectClient } from '@uis/routing';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// The TypeScript direct client across a pause_in_place switch: its answers come straight from the engines, and
// answerVersionSpans reads which version made which output token from them, exactly as the engines made them.
const TOKEN = 'admin-token-direct-versions';
const gw = gatewayOnSims({
  config: singleRolloutConfig(2),
  sim: { simDecodeUsPerToken: 3000 },
  server: { adminToken: TOKEN, healthProbeMs: 0 },
});

describe('direct client answers across an in-place switch', { timeout: 120_000 }, () => {
  it('each answer splits its output at the token where the version changed, as the engine made it', async () => {
    const client = new DirectClient({ discoveryUrl: `${gw.url}/rollout/engines`, longPollTimeoutS: 5 });
    try {
      const snap = await client.start();
      const from = snap.models.policy?.weight_version;
      const engines = (snap.models.policy?.engines ?? []).map((e) => e.engine_id);
      const sims = engines.map((id) => gw.launcher.serversOf(id)[0]!);
      const rids = ['direct-a', 'direct-b', 'direct-c', 'direct-d'];
      const answers = rids.map((rid) =>
        client.json<unknown>('/generate', {
          rid,
          text: rid,
          sampling_params: { max_new_tokens: 400, ignore_eos: true },
        }),
      );
      // Every request runs and has tokens before the switch.
      await expect
        .poll(() => sims.reduce((n, s) => n + s.stats().running, 0), { timeout: 10_000 })
        .toBe(rids.length);
      await expect
        .poll(() => Math.min(...sims.map((s) => s.stats().steps)), { timeout: 10_000 })
        .toBeGreaterThan(3);
      const r = await fetch(`${gw.url}/admin/roles/rollout/models/policy/weights/switch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          mode: 'pause_in_place',
          update: { source: 'disk', model_path: '/ckpt/direct-v2', weight_version: 'direct-v2' },
        }),
      });
      expect(r.status).toBe(200);
      const done = await Promise.all(answers);
      for (const [i, rid] of rids.entries()) {
        const spans = answerVersionSpans(done[i]);
        expect(spans.map((s) => s.version)).toEqual([from, 'direct-v2']);
        // The engine's own record of which version made each token.
        const runs = sims.map((s) => s.tokenVersions(rid)).find((x) => x !== undefined) ?? [];
        expect(spans).toEqual(
          runs.map(([start, version], k) => ({ version, start, end: runs[k + 1]?.[0] ?? 400 })),
        );
      }
    } finally {
      await client.close();
    }
  });
});
