import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InProcessSimLauncher } from '../service/in-process-sim-launcher.ts';
import { UisService } from '../service/uis-service.ts';
import { singleRolloutConfig } from '../testing/fixtures.ts';
import { UisServer } from './uis-server.ts';

const launcher = new InProcessSimLauncher();
let service: UisService;
let server: UisServer;
let url = '';

beforeAll(async () => {
  service = new UisService({ config: singleRolloutConfig(), launcher });
  await service.start();
  server = new UisServer({ service, adminToken: 'the-admin-token', servingToken: 'the-serving-token' });
  url = (await server.listen(0)).url;
}, 60_000);

afterAll(async () => {
  await server?.close();
  await service?.stop();
  await launcher.closeAll();
});

const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

describe('serving token (RFC open question 3: authenticated discovery)', () => {
  it('refuses discovery, health and serving without a valid token, accepts the serving or admin token', async () => {
    for (const path of ['/rollout/engines', '/rollout/health', '/rollout/v1/models']) {
      expect((await fetch(`${url}${path}`)).status).toBe(401);
      expect((await fetch(`${url}${path}`, { headers: bearer('wrong-token') })).status).toBe(401);
      expect((await fetch(`${url}${path}`, { headers: bearer('the-serving-token') })).status).toBe(200);
      expect((await fetch(`${url}${path}`, { headers: bearer('the-admin-token') })).status).toBe(200);
    }
    const body = JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } });
    const refused = await fetch(`${url}/rollout/generate`, { method: 'POST', body });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error: { code: 'unauthorized' } });
    const before = launcher.serversOf('policy/0')[0]?.stats().requests;
    const ok = await fetch(`${url}/rollout/generate`, {
      method: 'POST',
      body,
      headers: bearer('the-serving-token'),
    });
    expect(ok.status).toBe(200);
    expect(launcher.serversOf('policy/0')[0]?.stats().requests).toBe((before ?? 0) + 1);
    // The serving token is not an admin token.
    const admin = await fetch(`${url}/admin/phases`, { headers: bearer('the-serving-token') });
    expect(admin.status).toBe(401);
  });
});
