import { waitFor } from '@uis/sglang-engine/testing';
import { ConsoleStateSchema } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';

const TOKEN = 'console-admin-token';
const gw = gatewayOnSims({
  config: deferTestConfig(),
  sim: { simOnloadMs: 10, simOffloadMs: 10 },
  server: { adminToken: TOKEN, throttleMs: 50, healthProbeMs: 100 },
});

/** A tRPC v11 call over plain HTTP (no transformer): queries are GET, mutations POST the raw input. */
async function mutate(name: string, input: unknown, token?: string) {
  const r = await fetch(`${gw.url}/trpc/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(input),
  });
  return {
    status: r.status,
    json: (await r.json()) as {
      result?: { data: { ok: boolean; operation_id?: string | null; result?: Record<string, unknown> } };
      error?: { message: string; data: { code: string; error?: { code: string; path?: string } } };
    },
  };
}

/** Reads SSE `data:` payloads of the `changes` subscription until `want` of them arrived. */
/** Reads state events until `enough(events)` holds (or the stream ends); `onFirst` runs after the first. */
async function readEvents(
  stream: ReadableStream<Uint8Array>,
  enough: (events: unknown[]) => boolean,
  onFirst?: () => void,
) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  const out: unknown[] = [];
  let buffer = '';
  while (!enough(out)) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut = buffer.indexOf('\n\n');
    while (cut !== -1) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      // tRPC's own `connected` / `ping` events carry no state.
      if (/^event:/m.test(block)) {
        cut = buffer.indexOf('\n\n');
        continue;
      }
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      if (data !== '' && data.startsWith('{')) {
        out.push(JSON.parse(data));
        if (out.length === 1) onFirst?.();
        if (enough(out)) break;
      }
      cut = buffer.indexOf('\n\n');
    }
  }
  await reader.cancel();
  return out;
}

describe('tRPC router for the console', { timeout: 60_000 }, () => {
  it('answers the state query with a valid ConsoleState', async () => {
    const r = await fetch(`${gw.url}/trpc/state`);
    expect(r.status).toBe(200);
    const body = (await r.json()) as { result: { data: unknown } };
    const state = ConsoleStateSchema.parse(body.result.data);
    expect(state.roles.map((x) => x.role)).toEqual(['rollout', 'genrm', 'teacher']);
    expect(state.replicas.map((x) => x.engine_id).sort()).toEqual(
      ['judge/0', 'judge/1', 'policy/0', 'policy/1', 'teacher/0'].sort(),
    );
    expect(state.replicas.find((x) => x.engine_id === 'policy/0')?.planned).toEqual([
      { node: 'node-0', gpu_ids: [0, 1, 2, 3] },
    ]);
    expect(state.activation_groups[0]).toMatchObject({
      name: 'actor',
      current_phase: 'rollout',
      blocked: null,
    });
    expect(state.activation_groups[0]?.transitions.at(-1)).toMatchObject({ to: 'rollout', status: 'ok' });
    expect(state.cluster.nodes).toEqual([{ name: 'node-0', gpus: 8 }]);
  });

  it('keeps a health history for every replica, also those no client calls (probes)', async () => {
    const state = await waitFor(
      async () => {
        const body = (await (await fetch(`${gw.url}/trpc/state`)).json()) as { result: { data: unknown } };
        const s = ConsoleStateSchema.parse(body.result.data);
        return s.replicas.every((r) => r.health.length >= 2) && s;
      },
      15_000,
      'two health checks of every replica',
    );
    for (const r of state.replicas) expect(r.health.at(-1)).toMatchObject({ ok: true, error: null });
  });

  it('checks tokens and refuses admin mutations without the right one (UNAUTHORIZED, nothing changes)', async () => {
    expect((await mutate('checkToken', { token: TOKEN })).json.result?.data).toEqual({
      ok: true,
      permission: 'admin',
    });
    const wrong = await mutate('checkToken', { token: 'nope' });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error?.data.code).toBe('UNAUTHORIZED');
    for (const token of [undefined, 'wrong']) {
      const r = await mutate('drainModel', { role: 'rollout', model: 'policy' }, token);
      expect(r.status).toBe(401);
      expect(r.json.error?.data.code).toBe('UNAUTHORIZED');
    }
    expect(
      gw.plane.managers
        .get('rollout')!
        .snapshot()
        .models.policy?.replicas.map((x) => x.state),
    ).toEqual(['ready', 'ready']);
  });

  it('runs the admin mutations with the token and reports refusals as errors with a message', async () => {
    // The same command, envelope and audit record as the admin REST route, with an operation id of the console's.
    const drained = await mutate(
      'drainModel',
      { role: 'rollout', model: 'policy', operation_id: 'console-drain-1' },
      TOKEN,
    );
    expect(drained.json.result?.data).toMatchObject({
      ok: true,
      operation_id: 'console-drain-1',
      result: { memory_released: true },
    });
    const again = await mutate(
      'drainModel',
      { role: 'rollout', model: 'policy', operation_id: 'console-drain-1' },
      TOKEN,
    );
    expect(again.json.result?.data).toEqual(drained.json.result?.data);
    const activated = await mutate('activateModel', { role: 'rollout', model: 'policy' }, TOKEN);
    expect(activated.json.result?.data).toMatchObject({ ok: true, result: { onloaded: true } });
    const restart = await mutate('restartReplica', { role: 'rollout', engine_id: 'policy/1' }, TOKEN);
    expect(restart.json.result?.data).toMatchObject({
      ok: true,
      result: { engine_id: 'policy/1', restarted: true },
    });
    const unknown = await mutate('restartReplica', { role: 'rollout', engine_id: 'nope/9' }, TOKEN);
    // The error table's status and tRPC's code for it, as the REST door answers unknown_engine.
    expect(unknown.status).toBe(404);
    expect(unknown.json.error?.data).toMatchObject({ code: 'NOT_FOUND', error: { code: 'unknown_engine' } });
    expect(unknown.json.error?.message).toContain('nope/9');
    const conflict = await mutate(
      'activateModel',
      { role: 'rollout', model: 'policy', operation_id: 'console-drain-1' },
      TOKEN,
    );
    expect(conflict.status).toBe(409);
    expect(conflict.json.error?.data).toMatchObject({
      code: 'CONFLICT',
      error: { code: 'operation_id_conflict' },
    });
    const events = gw.plane.events.list({ kind: 'admin.drain_model', limit: 10 });
    expect(events.filter((e) => e.operation_id === 'console-drain-1')).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ actor: 'console', subject: 'rollout/policy' });
    // Reads of the table are queries.
    const phases = await fetch(`${gw.url}/trpc/listPhases`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(
      ((await phases.json()) as { result: { data: { result: { leases: unknown[] } } } }).result.data.result
        .leases,
    ).toHaveLength(1);
  });

  it('pushes the state on the changes subscription (SSE) and again when something changes', async () => {
    const controller = new AbortController();
    const r = await fetch(`${gw.url}/trpc/changes`, { signal: controller.signal });
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    let advanced: Promise<unknown> = Promise.resolve();
    // Other changes (health, load) may push states of their own first: read until the advance's event shows.
    const eventCount = (e: unknown) => ConsoleStateSchema.parse(e).events.length;
    const events = await readEvents(
      r.body!,
      (seen) => seen.length >= 2 && eventCount(seen.at(-1)) > eventCount(seen[0]),
      () => {
        advanced = mutate('advancePhase', { group: 'actor' }, TOKEN);
      },
    );
    controller.abort();
    await advanced;
    const states = events.map((e) => ConsoleStateSchema.parse(e));
    expect(states.length).toBeGreaterThanOrEqual(2);
    expect(states.at(-1)!.generated_at).toBeGreaterThanOrEqual(states[0]!.generated_at);
    expect(states.at(-1)!.events.length).toBeGreaterThan(states[0]!.events.length);
  });

  it('serves the console at / only (it routes by hash), and JSON 404s on every other unknown path', async () => {
    const root = await fetch(`${gw.url}/`);
    expect(root.status).toBe(200);
    expect(root.headers.get('content-type')).toContain('text/html');
    for (const path of ['/replicas/some/deep/link', '/openapi.yaml', '/v2/models', '/docs/nothing']) {
      const unknown = await fetch(`${gw.url}${path}`);
      expect(unknown.status, path).toBe(404);
      expect(unknown.headers.get('content-type'), path).toContain('application/json');
      expect(await unknown.json(), path).toMatchObject({ error: { code: 'not_found', path } });
    }
    const api = await fetch(`${gw.url}/admin/nothing`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(api.status).toBe(404);
    expect(await api.json()).toMatchObject({ error: { code: 'not_found' } });
    const traversal = await fetch(`${gw.url}/..%2F..%2Fpackage.json`);
    expect(await traversal.text()).not.toContain('"name": "@uis/gateway"');
  });
});
