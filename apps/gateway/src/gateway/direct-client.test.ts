import { DirectClient } from '@uis/routing';
import type { DiscoverySnapshot } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';

const gw = gatewayOnSims({ config: splitTestConfig(), server: { adminToken: 'direct-client-admin' } });
const { launcher } = gw;

describe('the routing package DirectClient against the gateway discovery', { timeout: 60_000 }, () => {
  it('routes with the published rules (aliases, route keys) and follows publications by long-poll', async () => {
    const client = new DirectClient({ discoveryUrl: `${gw.url}/rollout/engines`, longPollTimeoutS: 5 });
    try {
      const first = await client.start();
      expect(first.routing?.aliases).toEqual({ actor: 'policy' });
      const codeIds = ['policy-code/0', 'policy-code/1'];
      const before = codeIds.reduce((n, id) => n + (launcher.serversOf(id)[0]?.stats().requests ?? 0), 0);
      const out = await client.json<{ text: string }>('/generate', {
        text: 'direct',
        route_key: 'code',
        sampling_params: { max_new_tokens: 2 },
      });
      expect(out.text).toEqual(expect.any(String));
      // The request went straight to a policy-code engine, chosen by the same routing rules as the gateway's.
      const after = codeIds.reduce((n, id) => n + (launcher.serversOf(id)[0]?.stats().requests ?? 0), 0);
      expect(after - before).toBe(1);
      expect(client.lastAttempts.at(-1)?.engineId).toMatch(/^policy-code\//);

      const next = new Promise<DiscoverySnapshot>((resolve) => {
        const off = client.onSnapshot((s) => {
          if (s.models['policy-code']?.state === 'sleeping') {
            off();
            resolve(s);
          }
        });
      });
      await gw.plane.managers.get('rollout')!.drainModel('policy-code');
      const seen = await next;
      expect(seen.models['policy-code']?.engines.every((e) => !e.direct_eligible)).toBe(true);
      expect(client.watchMode).toBe('long_poll');
    } finally {
      await client.close();
    }
  });
});
