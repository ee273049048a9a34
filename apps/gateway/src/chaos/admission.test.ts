import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';
import { within } from '../testing/uis-process.ts';

// Chaos: more requests than a role admits. Two run, two wait, the rest are refused at once; a wait has a deadline.
const gw = gatewayOnSims({
  config: singleRolloutConfig(),
  sim: { simDecodeUsPerToken: 1000 },
  server: {
    adminToken: 'admin-token-admission',
    healthProbeMs: 0,
    admission: { limit: 2, queue: 2, queueTimeoutMs: 4000 },
  },
});

function generate(tokens: number) {
  return fetch(`${gw.url}/rollout/generate`, {
    method: 'POST',
    body: JSON.stringify({ text: 'x', sampling_params: { max_new_tokens: tokens, ignore_eos: true } }),
  }).then(async (r) => ({
    status: r.status,
    retryAfter: r.headers.get('retry-after'),
    body: await r.text(),
  }));
}

describe('chaos: admission limit per role', { timeout: 60_000 }, () => {
  it('admits the limit, queues the queue, refuses the rest with 503 + Retry-After', async () => {
    const answers = await Promise.all(Array.from({ length: 8 }, () => generate(500)));
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 503);
    expect(ok).toHaveLength(4);
    expect(refused).toHaveLength(4);
    for (const r of refused) {
      expect(r.retryAfter).toBe('1');
      expect(JSON.parse(r.body)).toMatchObject({ error: { code: 'admission_rejected' } });
    }
    const gate = gw.server.gateways.get('rollout')?.admission;
    await within(2000, () => gate?.active === 0 && gate.waiting === 0, 'slots back');
  });

  it('a request that waits longer than the queue timeout is refused; the running ones finish', async () => {
    const long = [generate(6000), generate(6000)];
    const gate = gw.server.gateways.get('rollout')?.admission;
    await within(5000, () => gate?.active === 2, 'two running');
    const t0 = Date.now();
    const waited = await generate(1);
    expect(waited.status).toBe(503);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3900);
    expect((await Promise.all(long)).map((a) => a.status)).toEqual([200, 200]);
  });
});
