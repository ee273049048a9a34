import { commandRoutes } from '@uis/control-plane';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';
import { adminRequest, callAdmin } from './admin-command.ts';

const TOKEN = 'cli-admin-token';
const gw = gatewayOnSims({ config: singleRolloutConfig(), server: { adminToken: TOKEN } });
const route = (name: string) => commandRoutes().find((r) => r.name === name)!;

describe('uis admin: the CLI door of the command table', () => {
  it('fills path parameters, sends the rest as JSON body or query, with the operation id as Idempotency-Key', () => {
    const post = adminRequest(route('drain_model'), {
      url: 'http://h:1/',
      token: 't',
      args: ['role=rollout', 'model=policy', 'deadline_ms=500'],
      idempotencyKey: 'k-1',
    });
    expect(post.url).toBe('http://h:1/admin/roles/rollout/models/policy/drain');
    expect(JSON.parse(String(post.init.body))).toEqual({ deadline_ms: 500 });
    expect(post.init.headers).toMatchObject({ 'idempotency-key': 'k-1', 'x-uis-actor': 'cli' });
    const get = adminRequest(route('list_events'), {
      url: 'http://h:1',
      token: 't',
      args: ['kind=admin.drain'],
    });
    expect(get.url).toBe('http://h:1/admin/events?kind=admin.drain');
    expect(() => adminRequest(route('drain'), { url: 'http://h:1', token: 't', args: [] })).toThrow(
      'needs role',
    );
  });

  it('runs a command with the same envelope, operation ids and audit record as the other doors', async () => {
    const opts = { url: gw.url, token: TOKEN, idempotencyKey: 'cli-drain-1' };
    const first = await callAdmin('drain_model', { ...opts, args: ['role=rollout', 'model=policy'] });
    expect(first).toMatchObject({
      ok: true,
      operation_id: 'cli-drain-1',
      result: { engines: [expect.objectContaining({ engine_id: 'policy/0' })] },
    });
    expect(await callAdmin('drain_model', { ...opts, args: ['role=rollout', 'model=policy'] })).toEqual(
      first,
    );
    expect(gw.plane.events.list({ kind: 'admin.drain_model', limit: 5 })).toMatchObject([
      { actor: 'cli', operation_id: 'cli-drain-1', subject: 'rollout/policy' },
    ]);
    await callAdmin('activate_model', { url: gw.url, token: TOKEN, args: ['role=rollout', 'model=policy'] });
    await expect(
      callAdmin('drain_model', { url: gw.url, token: TOKEN, args: ['role=critic', 'model=policy'] }),
    ).rejects.toMatchObject({ code: 'unknown_role', path: 'role' });
    await expect(callAdmin('nope', { url: gw.url, token: TOKEN, args: [] })).rejects.toMatchObject({
      code: 'usage',
    });
  });
});
