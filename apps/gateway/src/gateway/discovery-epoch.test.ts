import { DiscoverySnapshotSchema, ErrorBodySchema } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';

const gw = gatewayOnSims({ config: splitTestConfig(), server: { adminToken: 'admin-token-for-tests' } });

async function engines(query: string) {
  const t0 = performance.now();
  const r = await fetch(`${gw.url}/rollout/engines?${query}`);
  return { status: r.status, json: (await r.json()) as unknown, ms: performance.now() - t0 };
}

// DirectClient long-polls with the epoch of the snapshot it holds; a restarted gateway (new registry, revisions
// counted from the start again) must answer it at once, not after the long-poll's timeout.
describe('discovery long-poll across registry epochs', () => {
  it('answers at once when the client saw another registry_epoch', async () => {
    const { registry } = gw.plane.managers.get('rollout')!;
    const { json, ms } = await engines(
      `wait_revision=${registry.revision + 5}&timeout_s=20&registry_epoch=an-earlier-process`,
    );
    const snap = DiscoverySnapshotSchema.parse(json);
    expect(snap.registry_epoch).toBe(registry.snapshot().registry_epoch);
    expect(snap.topology_revision).toBe(registry.revision);
    expect(ms).toBeLessThan(5000);
  });

  it('still waits when the client saw the same epoch', async () => {
    const { registry } = gw.plane.managers.get('rollout')!;
    const epoch = registry.snapshot().registry_epoch ?? '';
    expect(epoch).not.toBe('');
    const { json, ms } = await engines(
      `wait_revision=${registry.revision}&timeout_s=0.3&registry_epoch=${encodeURIComponent(epoch)}`,
    );
    expect(DiscoverySnapshotSchema.parse(json).topology_revision).toBe(registry.revision);
    expect(ms).toBeGreaterThanOrEqual(280);
  });

  it('refuses an empty registry_epoch with its query path', async () => {
    const { status, json } = await engines('wait_revision=1&registry_epoch=');
    expect(status).toBe(400);
    expect(ErrorBodySchema.parse(json).error).toMatchObject({
      code: 'invalid_query',
      path: 'query.registry_epoch',
    });
  });
});
