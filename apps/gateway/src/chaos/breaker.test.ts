import { ConsoleStateSchema, DiscoverySnapshotSchema } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';
import { RecordingEngine } from '../testing/recording-engine.ts';

// Chaos: a replica dies without the manager noticing yet. The gateway's circuit breaker stops sending it work.
const ADMIN = 'admin-token-breaker';
const fakes: RecordingEngine[] = [];
afterAll(async () => {
  await Promise.allSettled(fakes.map((f) => f.close()));
});
// The open circuit stays open for the whole file (the default 5 s could pass on a loaded machine).
const gw = gatewayOnSims({
  config: splitTestConfig(),
  server: { adminToken: ADMIN, healthProbeMs: 0, breaker: { openMs: 600_000 } },
});

describe('chaos: a failing replica', { timeout: 60_000 }, () => {
  it('opens its circuit after 5 consecutive failures: routing skips it, requests still succeed elsewhere', async () => {
    const fake = await RecordingEngine.start({ modelPath: '/models/policy' });
    fakes.push(fake);
    const reg = await fetch(`${gw.url}/admin/roles/rollout/models/policy/engines`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: fake.url }),
    });
    expect(reg.status).toBe(200);
    const snap = (await (await fetch(`${gw.url}/rollout/engines`)).json()) as {
      models: { policy: { engines: Array<{ engine_id: string; base_url: string }> } };
    };
    const dead = snap.models.policy.engines.find((e) => e.base_url === fake.url)?.engine_id ?? '?';
    // The engine's port now refuses connections; its health check has not run yet, so it is still routed to.
    await fake.close();
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const r = await fetch(`${gw.url}/rollout/generate`, {
        method: 'POST',
        body: JSON.stringify({ model: 'policy', text: 'hi', sampling_params: { max_new_tokens: 1 } }),
      });
      await r.text();
      statuses.push(r.status);
    }
    expect(statuses.every((s) => s === 200)).toBe(true);
    const gateway = gw.server.gateways.get('rollout');
    expect(gateway?.breakers.state(dead)).toBe('open');
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toContain(`uis_circuit_breaker_state{role="rollout",engine_id="${dead}"} 2`);
    // Retries away from the dead replica stop once its circuit opened: at most the 5 that opened it.
    const retried =
      /uis_upstream_retries_total\{role="rollout",model="policy",reason="engine_unreachable"\} (\d+)/.exec(
        metrics,
      );
    expect(Number(retried?.[1] ?? 0)).toBe(5);
  });

  it('shows the open circuit on discovery (our schema, not the legacy rows) and in the console state', async () => {
    const rollout = gw.server.gateways.get('rollout')!;
    const dead = rollout.breakers.snapshot().find((c) => c.state === 'open')?.engineId;
    expect(dead).toBeDefined();
    for (const query of ['', '?schema=2']) {
      const snap = DiscoverySnapshotSchema.parse(
        await (await fetch(`${gw.url}/rollout/engines${query}`)).json(),
      );
      const circuits = Object.fromEntries(snap.models.policy!.engines.map((e) => [e.engine_id, e.circuit]));
      expect(circuits).toEqual({ 'policy/0': 'closed', 'policy/1': 'closed', [dead!]: 'open' });
    }
    // Relax's legacy shape keeps its own fields: no circuit anywhere in it.
    expect(await (await fetch(`${gw.url}/rollout/engines?schema=1`)).text()).not.toContain('circuit');
    const body = (await (await fetch(`${gw.url}/trpc/state`)).json()) as { result: { data: unknown } };
    const state = ConsoleStateSchema.parse(body.result.data);
    const views = Object.fromEntries(
      state.replicas.filter((r) => r.model === 'policy').map((r) => [r.engine_id, r.circuit]),
    );
    expect(views).toEqual({ 'policy/0': 'closed', 'policy/1': 'closed', [dead!]: 'open' });
  });
});
