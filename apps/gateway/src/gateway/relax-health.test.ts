import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';

/** Role health as Relax's health readers take it: `status` healthy only when every model of the role can serve,
 * so a role asleep in another phase reads unhealthy while the gateway answers (`gateway_status`). Layout: rollout,
 * GenRM and teacher take turns on one node; the group starts in rollout's phase (GenRM asleep), and an advance
 * takes it to the trainer's (rollout asleep). */
const ADMIN = 'relax-health-admin';
const gw = gatewayOnSims({ config: deferTestConfig(), server: { adminToken: ADMIN } });

async function health(role: string, query = ''): Promise<Record<string, unknown>> {
  const r = await fetch(`${gw.url}/${role}/health${query}`);
  expect(r.status).toBe(200);
  return (await r.json()) as Record<string, unknown>;
}

describe("role health tells a sleeping role from a serving one, in Relax's words", {
  timeout: 60_000,
}, () => {
  it('the serving role is healthy, a role asleep in another phase unhealthy; after the phase change rollout is', async () => {
    expect(await health('rollout')).toMatchObject({
      status: 'healthy',
      service: 'rollout',
      gateway_status: 'healthy',
      instances: { policy: { status: 'healthy' } },
      phase: 'rollout',
      can_serve: true,
    });
    expect(await health('genrm')).toMatchObject({
      status: 'unhealthy',
      service: 'genrm',
      gateway_status: 'healthy',
      can_serve: false,
    });
    expect(await health('rollout', '?schema=1')).toEqual({ status: 'healthy', service: 'rollout' });

    const advanced = await fetch(`${gw.url}/admin/phases/advance`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
      body: JSON.stringify({ group: 'actor' }),
    });
    expect(advanced.status).toBe(200);
    // The scorers have no work: the group passes their phases and holds the trainer's, where rollout sleeps.
    await waitFor(async () => (await health('rollout')).phase === 'train', 30_000);
    const rollout = await health('rollout');
    expect(rollout).toMatchObject({
      status: 'unhealthy',
      service: 'rollout',
      gateway_status: 'healthy',
      instances: { policy: { status: 'unhealthy' } },
      can_serve: false,
    });
    expect((rollout.models as Record<string, { state: string }>).policy!.state).toBe('sleeping');
    expect(await health('rollout', '?schema_version=1')).toEqual({ status: 'unhealthy', service: 'rollout' });
  });
});
