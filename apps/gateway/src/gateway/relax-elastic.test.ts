import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { elasticRolloutConfig, gatewayOnSims } from '../testing/fixtures.ts';

const TOKEN = 'relax-elastic-admin';
const SCALE_TOKEN = 'relax-autoscaler-scale-only';
const gw = gatewayOnSims({
  config: elasticRolloutConfig(2, 2),
  server: { adminToken: TOKEN, scaleToken: SCALE_TOKEN },
});

async function call(method: 'GET' | 'POST', path: string, body?: unknown, token: string | null = TOKEN) {
  const r = await fetch(`${gw.url}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const statusOf = async (kind: string, id: unknown) =>
  (await call('GET', `/rollout/${kind}/${String(id)}`)).body.status as string;

describe("Relax's elastic API under /<role>/ (docs/en/guide/elastic-rollout.md)", { timeout: 90_000 }, () => {
  it('scale_out and scale_in with Relax shapes: request_id/status/message, status by id, lists, cancel, 400/404/409', async () => {
    // The admin token, as every admin command: the same permission through this door.
    expect((await call('POST', '/rollout/scale_out', { num_replicas: 3 }, null)).status).toBe(401);
    const out = await call('POST', '/rollout/scale_out', {
      model_name: 'default',
      num_replicas: 3,
      timeout_secs: 60,
    });
    expect(out.status).toBe(200);
    expect(Object.keys(out.body).sort()).toEqual(['message', 'request_id', 'status']);
    expect(out.body.status).toBe('PENDING');
    // One scale operation at a time: 409.
    expect((await call('POST', '/rollout/scale_in', { num_replicas: 2 })).status).toBe(409);
    await waitFor(
      async () => (await statusOf('scale_out', out.body.request_id)) === 'ACTIVE',
      30_000,
      'ACTIVE',
    );
    const got = (await call('GET', `/rollout/scale_out/${String(out.body.request_id)}`)).body;
    expect(got).toMatchObject({
      request_id: out.body.request_id,
      status: 'ACTIVE',
      model_name: 'policy',
      num_replicas: 3,
      engine_urls: [],
      engine_ids: ['policy/2'],
      failed_engines: [],
      error_message: null,
    });
    expect(typeof got.created_at).toBe('number');
    // Absolute targets: met already is NOOP.
    expect((await call('POST', '/rollout/scale_out', { num_replicas: 3 })).body.status).toBe('NOOP');
    const listed = (await call('GET', '/rollout/scale_out?status=ACTIVE&model_name=policy')).body;
    expect(listed).toMatchObject({ total_count: 1, status_filter: 'ACTIVE', model_name: 'policy' });
    expect((await call('GET', '/rollout/scale_out?status=BOGUS')).status).toBe(400);
    expect((await call('GET', '/rollout/scale_out/no-such-id')).status).toBe(404);
    // Initial engines are protected: 400; a dry run previews LIFO; then the scale-in completes.
    expect((await call('POST', '/rollout/scale_in', { num_replicas: 1 })).status).toBe(400);
    const dry = await call('POST', '/rollout/scale_in', { num_replicas: 2, dry_run: true });
    expect(dry.body.status).toBe('COMPLETED');
    expect((await call('GET', `/rollout/scale_in/${String(dry.body.request_id)}`)).body.engine_ids).toEqual([
      'policy/2',
    ]);
    const inn = await call('POST', '/rollout/scale_in', { num_replicas: 2, timeout_secs: 5 });
    await waitFor(
      async () => (await statusOf('scale_in', inn.body.request_id)) === 'COMPLETED',
      30_000,
      'COMPLETED',
    );
    expect((await call('GET', '/rollout/scale_in')).body.total_count).toBe(2);
    // A scale-in id is not a scale-out: 404 at the scale-out path.
    expect((await call('GET', `/rollout/scale_out/${String(inn.body.request_id)}`)).status).toBe(404);
    // Cancel of an operation that ended: refused; the batch cancel's dry run names nothing running.
    expect((await call('POST', `/rollout/scale_out/${String(out.body.request_id)}/cancel`)).status).toBe(409);
    expect((await call('POST', '/rollout/scale_out_cancel', { dry_run: true })).body).toMatchObject({
      dry_run: true,
      request_ids: [],
    });
    expect(gw.plane.managerOf('rollout').registry.snapshot().models.policy?.engines).toHaveLength(2);
  });

  it("takes the scale token (gateway.scale_token) on these paths only; Relax's keep_partial and a bad policy", async () => {
    // Relax's autoscaler sends no credential: its scale commands are refused, never opened by default (reading the
    // lists is a serving read, open here as discovery is without a serving token).
    expect((await call('POST', '/rollout/scale_out', { num_replicas: 3 }, null)).status).toBe(401);
    expect((await call('POST', '/rollout/scale_in', { num_replicas: 2 }, null)).status).toBe(401);
    // A bad partial_success_policy is a 400 at its path, before anything starts.
    const bad = await call('POST', '/rollout/scale_out', { num_replicas: 3, partial_success_policy: 'some' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { path: 'body.partial_success_policy' } });
    // The scale token drives scale_out (Relax's keep_partial as a request field), status and scale_in...
    const out = await call(
      'POST',
      '/rollout/scale_out',
      { num_replicas: 3, partial_success_policy: 'keep_partial' },
      SCALE_TOKEN,
    );
    expect(out.status).toBe(200);
    await waitFor(
      async () =>
        (await call('GET', `/rollout/scale_out/${String(out.body.request_id)}`, undefined, SCALE_TOKEN)).body
          .status === 'ACTIVE',
      30_000,
      'ACTIVE',
    );
    const got = (await call('GET', `/rollout/scale_out/${String(out.body.request_id)}`)).body;
    expect(got).toMatchObject({ partial_success_policy: 'keep_partial', actor: 'relax', failed_engines: [] });
    const inn = await call('POST', '/rollout/scale_in', { num_replicas: 2 }, SCALE_TOKEN);
    expect(inn.status).toBe(200);
    await waitFor(
      async () => (await statusOf('scale_in', inn.body.request_id)) === 'COMPLETED',
      30_000,
      'COMPLETED',
    );
    // ...and opens nothing else: not the same command through the admin door, not another admin command.
    expect(
      (await call('POST', '/admin/roles/rollout/scale_out', { num_replicas: 3 }, SCALE_TOKEN)).status,
    ).toBe(401);
    expect((await call('POST', '/admin/roles/rollout/drain', {}, SCALE_TOKEN)).status).toBe(401);
  });
});

describe('gateway.scale_auth: open', { timeout: 90_000 }, () => {
  const open = gatewayOnSims({
    config: elasticRolloutConfig(2, 2),
    server: { adminToken: TOKEN, scaleOpen: true },
  });
  const post = (path: string, body: unknown) =>
    fetch(`${open.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it("takes a credential-less scale call as Relax's own server does, and opens nothing else", async () => {
    const out = await post('/rollout/scale_out', { num_replicas: 3 });
    expect(out.status).toBe(200);
    const id = ((await out.json()) as { request_id: string }).request_id;
    await waitFor(
      async () =>
        ((await (await fetch(`${open.url}/rollout/scale_out/${id}`)).json()) as { status: string }).status ===
        'ACTIVE',
      30_000,
      'ACTIVE',
    );
    expect((await post('/admin/roles/rollout/scale_out', { num_replicas: 2 })).status).toBe(401);
    expect((await post('/admin/roles/rollout/drain', {})).status).toBe(401);
  });
});
