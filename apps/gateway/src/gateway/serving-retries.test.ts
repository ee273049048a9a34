import { ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';
import { RecordingEngine } from '../testing/recording-engine.ts';

// Retries through a whole UisServer: its `retry` options and clock reach every role's serving routes and the GenRM
// adapter, and a retry goes around a replica whose circuit is open.
const ADMIN = 'admin-token-retries';
const clock = new ManualClock();
const fakes: RecordingEngine[] = [];
afterAll(async () => {
  await Promise.allSettled(fakes.map((f) => f.close()));
});
const gw = gatewayOnSims({
  config: splitTestConfig(),
  server: {
    adminToken: ADMIN,
    healthProbeMs: 0,
    // Circuits stay open for the whole file, however slow the machine.
    breaker: { openMs: 600_000 },
    retry: { initialBackoffMs: 50, backoffMultiplier: 2, maxBackoffMs: 1000, jitter: 0 },
    clock,
  },
});

/** A request whose retry waits run on the fake clock: each wait is let through as soon as it is taken. */
async function driven(
  path: string,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  let done = false;
  const answer = fetch(`${gw.url}${path}`, { method: 'POST', body: JSON.stringify(body) }).then(
    async (r) => ({
      status: r.status,
      json: (await r.json()) as Record<string, unknown>,
    }),
  );
  answer.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  await waitFor(
    async () => {
      if (clock.pending > 0) await clock.advance(clock.pendingDelays()[0]!);
      return done || undefined;
    },
    30_000,
    `an answer to ${path}`,
  );
  return answer;
}

/** An engine registered to a model, then stopped: its port refuses connections, and no health check has noticed. */
async function deadReplica(role: string, model: string, modelPath: string): Promise<string> {
  const fake = await RecordingEngine.start({ modelPath });
  fakes.push(fake);
  const reg = await fetch(`${gw.url}/admin/roles/${role}/models/${model}/engines`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: fake.url }),
  });
  expect(reg.status).toBe(200);
  const id = ((await reg.json()) as { result: { engine_id: string } }).result.engine_id;
  await fake.close();
  return id;
}

function retriesOf(metrics: string, role: string, model: string): number {
  const m = new RegExp(
    `uis_upstream_retries_total\\{role="${role}",model="${model}",reason="engine_unreachable"\\} (\\d+)`,
  ).exec(metrics);
  return Number(m?.[1] ?? 0);
}

describe('serving retries through the server', { timeout: 60_000 }, () => {
  it('waits gateway.retry on the server clock, then answers the spent budget as JSON', async () => {
    // Both replicas of policy-code refuse connections.
    for (const id of ['policy-code/0', 'policy-code/1']) await gw.launcher.serversOf(id)[0]?.close();
    const answer = fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      body: JSON.stringify({ model: 'policy-code', text: 'x', sampling_params: { max_new_tokens: 1 } }),
    });
    let settled = false;
    void answer.finally(() => {
      settled = true;
    });
    await clock.untilPending(1);
    expect(clock.pendingDelays()).toEqual([50]);
    await clock.advance(49);
    expect(settled).toBe(false);
    await clock.advance(1);
    const r = await answer;
    expect(r.status).toBe(502);
    const body = (await r.json()) as { error: { code: string; details: unknown; message: string } };
    expect(body.error.code).toBe('engine_unreachable');
    expect(body.error.details).toEqual({
      attempts: 2,
      engines: expect.arrayContaining(['policy-code/0', 'policy-code/1']),
    });
    expect(body.error.message).toMatch(/gave up after 2 attempts/);
    // No third replica: one retry, no second wait.
    expect(clock.pending).toBe(0);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(retriesOf(metrics, 'rollout', 'policy-code')).toBe(1);
  });

  it('a retry never goes to a replica whose circuit is open', async () => {
    const rollout = gw.server.gateways.get('rollout')!;
    // policy/1 failed five times in a row: its circuit is open (for the whole file).
    for (let i = 0; i < 5; i++) rollout.breakers.failure('policy/1');
    expect(rollout.breakers.state('policy/1')).toBe('open');
    await deadReplica('rollout', 'policy', '/models/policy');
    const atOpen = gw.launcher.serversOf('policy/1')[0]?.stats().requests ?? 0;
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await driven('/rollout/generate', {
        model: 'policy',
        text: 'around',
        sampling_params: { max_new_tokens: 1 },
      });
      statuses.push(r.status);
    }
    expect(statuses.every((s) => s === 200)).toBe(true);
    // The dead replica was tried and retried away from (first attempts rotate over the replicas), and no
    // attempt, first or retry, reached the open one.
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(retriesOf(metrics, 'rollout', 'policy')).toBeGreaterThanOrEqual(1);
    expect(gw.launcher.serversOf('policy/1')[0]?.stats().requests ?? 0).toBe(atOpen);
  });

  it('the GenRM adapter retries an unreachable replica by the same rules', async () => {
    const genrm = gw.server.gateways.get('genrm')!;
    const dead = await deadReplica('genrm', 'judge', '/models/judge');
    const statuses: number[] = [];
    // Until its circuit opens: the adapter's failures count against the replica like the proxy's do.
    for (let i = 0; i < 40 && genrm.breakers.state(dead) === 'closed'; i++) {
      const r = await driven('/genrm/generate', { messages: [{ role: 'user', content: 'score me' }] });
      statuses.push(r.status);
      if (i === 0) expect(r.json).toEqual({ response: expect.any(String) });
    }
    expect(genrm.breakers.state(dead)).toBe('open');
    expect(statuses.every((s) => s === 200)).toBe(true);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(retriesOf(metrics, 'genrm', 'judge')).toBe(5);
  });
});
