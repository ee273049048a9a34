import { waitFor } from '@uis/sglang-engine/testing';
import { encode } from '@uis/sglang-sim';
import { DiscoverySnapshotSchema, ErrorBodySchema } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';
import { RecordingEngine } from '../testing/recording-engine.ts';

const TOKEN = 'admin-token-for-tests';
const AUTH = { authorization: `Bearer ${TOKEN}` };
let external: RecordingEngine | undefined;
// Registered before the gateway's hooks: after-hooks run in reverse, so the external engine closes last.
afterAll(async () => {
  await external?.close();
});
const gw = gatewayOnSims({
  config: deferTestConfig(),
  server: { adminToken: TOKEN },
  sim: { simOnloadMs: 20, simOffloadMs: 20 },
});

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${gw.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}
const post = (path: string, body: unknown, headers: Record<string, string> = AUTH) =>
  call('POST', path, body, headers);
const errorCode = (json: unknown) => ErrorBodySchema.parse(json).error.code;
const states = (role: 'rollout' | 'genrm' | 'teacher') =>
  Object.values(gw.plane.managers.get(role)!.snapshot().models).flatMap((m) =>
    m.replicas.map((r) => r.state),
  );

describe('admin API', { timeout: 60_000 }, () => {
  it('forgets a barrier waiter whose client disconnects, without waiting for its timeout', async () => {
    const gone = new AbortController();
    const wait = fetch(`${gw.url}/admin/barriers/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...AUTH },
      body: JSON.stringify({ phase: 'train', group: 'actor', timeout_s: 600 }),
      signal: gone.signal,
    }).catch((e: unknown) => e);
    const waiting = () => gw.plane.barriers.list().reduce((n, b) => n + b.waiting, 0);
    await waitFor(() => waiting() > 0, 20_000);
    expect(gw.plane.barriers.list()).toMatchObject([{ group: 'actor', phase: 'train', waiting: 1 }]);
    gone.abort();
    expect(await wait).toBeInstanceOf(Error);
    // Well below the waiter's own 600 s timeout: it is the disconnect that removes it.
    await waitFor(() => waiting() === 0, 20_000);
    expect(gw.plane.barriers.list()).toEqual([]);
  });

  it('refuses every mutation without a valid bearer token (401) and changes nothing', async () => {
    const eventsBefore = gw.plane.events.list({ limit: 1000 }).length;
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong-token' },
      { authorization: TOKEN },
    ];
    for (const headers of attempts) {
      const drain = await post('/admin/roles/rollout/drain', {}, headers);
      expect(drain.status).toBe(401);
      expect(errorCode(drain.json)).toBe('unauthorized');
      const advance = await post('/admin/phases/advance', { group: 'actor' }, headers);
      expect(advance.status).toBe(401);
    }
    // Reads follow the serving token: none is configured here, so they are open (permissions.test.ts has the rest).
    expect((await call('GET', '/admin/phases', undefined, {})).status).toBe(200);
    expect(states('rollout')).toEqual(['ready', 'ready']);
    expect(gw.plane.coordinator.lease('actor')).toMatchObject({ phase: 'rollout', status: 'held' });
    expect(gw.plane.events.list({ limit: 1000 })).toHaveLength(eventsBefore);
  });

  it('reads phases: the group starts in its first phase with the scorers offloaded', async () => {
    const r = await call('GET', '/admin/phases', undefined, AUTH);
    expect(r.status).toBe(200);
    expect((r.json.result as { leases: unknown[] }).leases).toEqual([
      expect.objectContaining({ group: 'actor', phase: 'rollout', status: 'held' }),
    ]);
    expect(states('genrm')).toEqual(['sleeping', 'sleeping']);
    expect(states('teacher')).toEqual(['sleeping']);
  });

  it('drains and activates a model, audited with its operation id', async () => {
    const d = await post('/admin/roles/rollout/models/policy/drain', { operation_id: 'drain-policy-1' });
    expect(d.status).toBe(200);
    expect(d.json).toMatchObject({
      ok: true,
      operation_id: 'drain-policy-1',
      result: { memory_released: true },
    });
    expect(states('rollout')).toEqual(['sleeping', 'sleeping']);
    const a = await post(
      '/admin/roles/rollout/models/policy/activate',
      {},
      { ...AUTH, 'idempotency-key': 'act-1' },
    );
    expect(a.status).toBe(200);
    expect(states('rollout')).toEqual(['ready', 'ready']);
    const ev = await call('GET', '/admin/events?kind=admin.drain_model', undefined, AUTH);
    const events = (ev.json.result as { events: unknown }).events as Array<{
      operation_id: string;
      subject: string;
      actor: string;
    }>;
    expect(events.at(-1)).toMatchObject({
      operation_id: 'drain-policy-1',
      subject: 'rollout/policy',
      actor: 'admin',
    });
  });

  it('registers and unregisters an external engine', async () => {
    external = await RecordingEngine.start({ modelPath: '/models/policy' });
    const reg = await post('/admin/roles/rollout/models/policy/engines', { url: external.url });
    expect(reg.status).toBe(200);
    const id = (reg.json.result as { engine_id: string }).engine_id;
    let snap = DiscoverySnapshotSchema.parse((await call('GET', '/rollout/engines')).json);
    expect(snap.models.policy?.engines.map((e) => e.engine_id)).toContain(id);
    const notExternal = await post('/admin/roles/rollout/engines/unregister', { engine_id: 'policy/0' });
    expect(notExternal.status).toBe(409);
    expect(errorCode(notExternal.json)).toBe('not_external');
    const un = await post('/admin/roles/rollout/engines/unregister', { engine_id: id });
    expect(un.status).toBe(200);
    snap = DiscoverySnapshotSchema.parse((await call('GET', '/rollout/engines')).json);
    expect(snap.models.policy?.engines.map((e) => e.engine_id)).not.toContain(id);
  });

  it('validates bodies and names the path of what is wrong', async () => {
    const bad = await post('/admin/batches', {
      kind: 'teacher_logprobs',
      samples: [{ sample_id: 's0', input: { input_ids: [1, 2], logprob_start_len: 5 } }],
    });
    expect(bad.status).toBe(400);
    expect(ErrorBodySchema.parse(bad.json).error.path).toBe('samples[0].input.logprob_start_len');
    const json = await post('/admin/phases/advance', '{nope');
    expect(json.status).toBe(400);
    expect(errorCode(json.json)).toBe('invalid_json');
    const role = await post('/admin/roles/critic/drain', {});
    expect(role.status).toBe(404);
    expect(errorCode(role.json)).toBe('unknown_role');
  });

  it('runs the defer cycle: batches, idempotent phase advance, trainer barrier, weight update, release', async () => {
    const genrm = await post('/admin/batches', {
      kind: 'genrm_score',
      samples: [0, 1, 2].map((i) => ({
        sample_id: `g${i}`,
        input: { messages: [{ role: 'user', content: `Judge answer ${i}. Judgement:` }] },
      })),
    });
    expect(genrm.status).toBe(200);
    const genrmId = (genrm.json.result as { id: string; state: string }).id;
    expect((genrm.json.result as { state: string }).state).toBe('sealed');
    const ids = encode('a prompt and its response tokens');
    const teacher = await post('/admin/batches', {
      kind: 'teacher_logprobs',
      samples: [{ sample_id: 't0', input: { input_ids: ids, logprob_start_len: 2, response_length: 3 } }],
    });
    const teacherId = (teacher.json.result as { id: string }).id;

    const startedBefore = gw.plane.events.list({ kind: 'transition.started', limit: 1000 }).length;
    const headers = { ...AUTH, 'idempotency-key': 'advance-1' };
    const first = await post('/admin/phases/advance', { group: 'actor' }, headers);
    expect(first.status).toBe(200);
    const result = first.json.result as { path: string[]; to: string };
    expect(result.path).toEqual(['genrm_score', 'teacher_score', 'train']);
    expect(gw.plane.coordinator.lease('actor')).toMatchObject({ phase: 'train', status: 'held' });
    // The same operation id returns the first result and runs nothing again.
    const again = await post('/admin/phases/advance', { group: 'actor' }, headers);
    expect(again.json).toEqual(first.json);
    expect(gw.plane.events.list({ kind: 'transition.started', limit: 1000 }).length).toBe(startedBefore + 1);
    const conflict = await post('/admin/phases/advance', { group: 'actor', to: 'rollout' }, headers);
    expect(conflict.status).toBe(409);
    expect(errorCode(conflict.json)).toBe('operation_id_conflict');

    const g = await call('GET', `/admin/batches/${genrmId}`, undefined, AUTH);
    const gr = g.json.result as { batch: { state: string }; samples: unknown };
    expect(gr.batch.state).toBe('committed');
    const samples = gr.samples as Array<{
      sample_id: string;
      output: { score: number; response: string };
    }>;
    expect(samples.map((s) => s.sample_id)).toEqual(['g0', 'g1', 'g2']);
    for (const s of samples) expect([0, 1]).toContain(s.output.score);
    const t = await call('GET', `/admin/batches/${teacherId}`, undefined, AUTH);
    const tOut = (
      (t.json.result as { samples: unknown }).samples as Array<{
        output: { logprobs: number[]; token_ids: number[] };
      }>
    )[0]?.output;
    expect(tOut?.token_ids).toEqual(ids.slice(-3));
    expect(tOut?.logprobs).toHaveLength(3);

    const barrier = await post('/admin/barriers/wait', { phase: 'train', group: 'actor', timeout_s: 5 });
    expect(barrier.status).toBe(200);
    // The same envelope as every admin answer; the lease in snake_case with the proof of the last release.
    expect(barrier.json).toMatchObject({
      ok: true,
      operation_id: null,
      result: { group: 'actor', phase: 'train', status: 'held', last_release: { phase: 'teacher_score' } },
    });
    const early = await post('/admin/barriers/wait', { phase: 'rollout', group: 'actor', timeout_s: 0.2 });
    expect(early.status).toBe(504);
    expect(errorCode(early.json)).toBe('barrier_timeout');

    const weights = await post('/admin/roles/rollout/models/policy/weights', {
      source: 'disk',
      model_path: '/models/policy-step-1',
      weight_version: 'step-1',
    });
    expect(weights.status).toBe(200);
    const release = await post('/admin/barriers/release', {
      phase: 'train',
      group: 'actor',
      operation_id: 'rel-1',
    });
    expect(release.status).toBe(200);
    expect(states('rollout')).toEqual(['ready', 'ready']);
    const snap = DiscoverySnapshotSchema.parse((await call('GET', '/rollout/engines')).json);
    expect(snap.phase).toBe('rollout');
    expect(snap.models.policy?.engines.map((e) => e.weight_version)).toEqual(['step-1', 'step-1']);
    const gen = await call('POST', '/rollout/generate', {
      text: 'after the update',
      sampling_params: { max_new_tokens: 2 },
    });
    expect(gen.status).toBe(200);
    expect((gen.json.meta_info as { weight_version: string }).weight_version).toBe('step-1');

    const audit = await call('GET', '/admin/events?kind=admin.advance_phase', undefined, AUTH);
    const advances = (audit.json.result as { events: unknown }).events as Array<{
      operation_id: string | null;
      data: { ok: boolean };
    }>;
    expect(advances.filter((e) => e.operation_id === 'advance-1' && e.data.ok)).toHaveLength(1);
    expect(advances.some((e) => e.operation_id === 'advance-1' && !e.data.ok)).toBe(true);
  });
  it('deactivates and activates a whole role, lists batches, and refuses to resolve a lease that is not blocked', async () => {
    const one = await post('/admin/roles/rollout/models/policy/deactivate', {});
    expect(one.status).toBe(200);
    expect(states('rollout')).toEqual(['sleeping', 'sleeping']);
    expect(await post('/admin/roles/rollout/models/policy/activate', {})).toMatchObject({ status: 200 });
    const off = await post('/admin/roles/rollout/deactivate', {});
    expect(off.status).toBe(200);
    expect(states('rollout')).toEqual(['sleeping', 'sleeping']);
    const on = await post('/admin/roles/rollout/activate', { tags: ['weights', 'kv_cache', 'cuda_graph'] });
    expect(on.status).toBe(200);
    expect(states('rollout')).toEqual(['ready', 'ready']);
    const list = await call('GET', '/admin/batches?state=committed', undefined, AUTH);
    expect(
      ((list.json.result as { batches: unknown }).batches as Array<{ state: string }>).map((b) => b.state),
    ).toEqual(['committed', 'committed']);
    const badQuery = await call('GET', '/admin/batches?state=done', undefined, AUTH);
    expect(badQuery.status).toBe(400);
    const resolve = await post('/admin/phases/resolve', { group: 'actor', phase: 'rollout' });
    expect(resolve.status).toBe(409);
    expect(errorCode(resolve.json)).toBe('lease_not_blocked');
    // Without a group the layout's only one is meant, in the answer and in the audit trail.
    const unnamed = await post('/admin/phases/resolve', { phase: 'rollout' });
    expect(errorCode(unnamed.json)).toBe('lease_not_blocked');
    const resolves = (
      (await call('GET', '/admin/events?kind=admin.resolve_lease', undefined, AUTH)).json.result as {
        events: unknown;
      }
    ).events as Array<{ subject: string }>;
    expect(resolves.map((e) => e.subject)).toEqual(['actor', 'actor']);
    const missing = await call('GET', '/admin/batches/no-such-batch', undefined, AUTH);
    expect(missing.status).toBe(404);
    const metrics = await fetch(`${gw.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(
      /uis_phase_transition_duration_seconds_count\{group="actor",to="train",outcome="ok"\} 1/,
    );
    expect(metrics).toMatch(
      /uis_phase_transition_duration_seconds_count\{group="actor",to="rollout",outcome="ok"\} 1/,
    );
    expect(metrics).toMatch(/uis_deferred_batches\{kind="genrm_score",state="committed"\} 1/);
    expect(metrics).toMatch(/uis_deferred_batches\{kind="teacher_logprobs",state="committed"\} 1/);
  });
});
