import { describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';

// The console's Resolve control: a blocked activation lease resolved over tRPC, as the admin API's
// `POST /admin/phases/resolve` does, with the admin token and the coordinator's error codes.

const TOKEN = 'resolve-lease-token';
const gw = gatewayOnSims({
  config: deferTestConfig(),
  server: { adminToken: TOKEN, healthProbeMs: 0 },
  sim: { simOnloadMs: 20, simOffloadMs: 20 },
});

interface TrpcAnswer {
  result?: { data: { ok: boolean; operation_id: string | null; result: Record<string, unknown> } };
  error?: { message: string; data: { code: string; error: { code: string; path?: string } } };
}

async function mutate(name: string, input: unknown, token?: string) {
  const r = await fetch(`${gw.url}/trpc/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(input),
  });
  return { status: r.status, json: (await r.json()) as TrpcAnswer };
}
async function admin(path: string, body: unknown = {}) {
  const r = await fetch(`${gw.url}/admin${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify(body),
  });
  return r.status;
}
const lease = () => gw.plane.coordinator.lease('actor');

describe('resolving a blocked lease from the console', { timeout: 90_000 }, () => {
  it('needs the admin token, answers the coordinator codes for a bad phase, and lets transitions run again', async () => {
    // Block the lease as operator-hold.test.ts does: a batch for a drained scorer fails its phase's onload.
    expect(lease().phase).toBe('rollout');
    expect(await admin('/roles/genrm/models/judge/drain')).toBe(200);
    const batch = await admin('/batches', {
      kind: 'genrm_score',
      samples: [{ sample_id: 's0', input: { messages: [{ role: 'user', content: 'Judgement:' }] } }],
    });
    expect(batch).toBe(200);
    expect(await admin('/phases/advance', { group: 'actor' })).toBeGreaterThanOrEqual(500);
    expect(lease().status).toBe('blocked');
    const blockedAt = lease().phase;

    for (const token of [undefined, 'wrong']) {
      const refused = await mutate('resolveLease', { group: 'actor', phase: 'rollout' }, token);
      expect(refused.status).toBe(401);
      expect(refused.json.error?.data.code).toBe('UNAUTHORIZED');
    }
    expect(lease().status).toBe('blocked');

    const missing = await mutate('resolveLease', { group: 'actor' }, TOKEN);
    expect(missing.status).toBe(400);
    expect(missing.json.error?.data.error).toMatchObject({ code: 'invalid_input', path: 'input.phase' });
    const unknown = await mutate('resolveLease', { group: 'actor', phase: 'nope' }, TOKEN);
    expect(unknown.status).toBe(404);
    expect(unknown.json.error?.data.error).toMatchObject({ code: 'unknown_phase', path: 'input.phase' });
    expect(unknown.json.error?.message).toContain('phases: rollout -> genrm_score');
    const group = await mutate('resolveLease', { group: 'critic', phase: 'rollout' }, TOKEN);
    expect(group.json.error?.data.error).toMatchObject({
      code: 'unknown_activation_group',
      path: 'input.group',
    });
    expect(lease()).toMatchObject({ status: 'blocked', phase: blockedAt });

    const resolved = await mutate(
      'resolveLease',
      { group: 'actor', phase: 'rollout', note: 'judge held; rollout engines asleep' },
      TOKEN,
    );
    expect(resolved.status).toBe(200);
    expect(resolved.json.result?.data).toMatchObject({
      ok: true,
      operation_id: null,
      result: { group: 'actor', phase: 'rollout', holder: ['rollout'], status: 'held' },
    });
    expect(lease()).toMatchObject({ status: 'held', phase: 'rollout', holder: ['rollout'], reason: null });
    expect(gw.plane.events.list({ kind: 'lease.resolved', limit: 1 }).at(-1)).toMatchObject({
      subject: 'actor',
      actor: 'console',
      data: { phase: 'rollout', note: 'judge held; rollout engines asleep' },
    });
    // The admin REST route's audit record: the request, and the refusal's code and message.
    expect(gw.plane.events.list({ kind: 'admin.resolve_lease', limit: 10 }).map((e) => e.data)).toEqual([
      {
        ok: false,
        request: { group: 'actor' },
        error: { code: 'invalid_input', message: expect.any(String) },
      },
      {
        ok: false,
        request: { group: 'actor', phase: 'nope' },
        error: { code: 'unknown_phase', message: expect.stringContaining('nope') },
      },
      {
        ok: false,
        request: { group: 'critic', phase: 'rollout' },
        error: { code: 'unknown_activation_group', message: expect.stringContaining('critic') },
      },
      { ok: true, request: { group: 'actor', phase: 'rollout', note: 'judge held; rollout engines asleep' } },
    ]);

    const again = await mutate('resolveLease', { group: 'actor', phase: 'rollout' }, TOKEN);
    expect(again.json.error?.data.error).toMatchObject({ code: 'lease_not_blocked' });

    // Held again: with the scorer back in plane, the schedule moves on through its phases.
    expect((await mutate('activateModel', { role: 'genrm', model: 'judge' }, TOKEN)).status).toBe(200);
    const advanced = await mutate('advancePhase', { group: 'actor' }, TOKEN);
    expect(advanced.json.result?.data.ok).toBe(true);
    expect(lease()).toMatchObject({ status: 'held', phase: 'train' });
  });
});
