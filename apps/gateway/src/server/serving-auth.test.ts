import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

const gw = gatewayOnSims({
  config: singleRolloutConfig(),
  server: { adminToken: 'the-admin-token', servingToken: 'the-serving-token' },
});
const { launcher } = gw;

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

describe('serving token (RFC open question 3: authenticated discovery)', () => {
  it('refuses discovery, health and serving without a valid token, accepts the serving or admin token', async () => {
    for (const path of ['/rollout/engines', '/rollout/health', '/rollout/v1/models']) {
      expect((await fetch(`${gw.url}${path}`)).status).toBe(401);
      expect((await fetch(`${gw.url}${path}`, { headers: bearer('wrong-token') })).status).toBe(401);
      expect((await fetch(`${gw.url}${path}`, { headers: bearer('the-serving-token') })).status).toBe(200);
      expect((await fetch(`${gw.url}${path}`, { headers: bearer('the-admin-token') })).status).toBe(200);
    }
    const body = JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } });
    const refused = await fetch(`${gw.url}/rollout/generate`, { method: 'POST', body });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error: { code: 'unauthorized' } });
    const before = launcher.serversOf('policy/0')[0]?.stats().requests;
    const ok = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      body,
      headers: bearer('the-serving-token'),
    });
    expect(ok.status).toBe(200);
    expect(launcher.serversOf('policy/0')[0]?.stats().requests).toBe((before ?? 0) + 1);
    // The serving token reads the admin API, but is not an admin token.
    const read = await fetch(`${gw.url}/admin/phases`, { headers: bearer('the-serving-token') });
    expect(read.status).toBe(200);
    const admin = await fetch(`${gw.url}/admin/phases/advance`, {
      method: 'POST',
      body: '{}',
      headers: { ...bearer('the-serving-token'), 'content-type': 'application/json' },
    });
    expect(admin.status).toBe(403);
    expect(((await admin.json()) as { error: { code: string } }).error.code).toBe('forbidden');
  });

  it('/metrics (a Prometheus scrape) needs the serving or admin token once a serving token is set', async () => {
    const open = await fetch(`${gw.url}/metrics`);
    expect(open.status).toBe(401);
    expect(await open.json()).toMatchObject({
      error: { code: 'unauthorized', path: 'headers.authorization' },
    });
    expect((await fetch(`${gw.url}/metrics`, { headers: bearer('wrong-token') })).status).toBe(401);
    for (const token of ['the-serving-token', 'the-admin-token']) {
      const r = await fetch(`${gw.url}/metrics`, { headers: bearer(token) });
      expect(r.status).toBe(200);
      expect(await r.text()).toContain('uis_');
    }
  });
});

const open = gatewayOnSims({ config: singleRolloutConfig(), server: { adminToken: 'the-admin-token' } });

describe('without a serving token', () => {
  it('/metrics stays open, like discovery and serving', async () => {
    const r = await fetch(`${open.url}/metrics`);
    expect(r.status).toBe(200);
  });
});
