import { waitFor } from '@uis/sglang-engine/testing';
import { encode } from '@uis/sglang-sim';
import { DiscoverySnapshotSchema, ErrorBodySchema } from '@uis/spec';
import OpenAI from 'openai';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';
import { RecordingEngine } from '../testing/recording-engine.ts';

const ADMIN = 'admin-token-for-tests';
const extras: RecordingEngine[] = [];
// Registered before the gateway's hooks, so it runs after the gateway is stopped (after-hooks run in reverse).
afterAll(async () => {
  await Promise.allSettled(extras.map((e) => e.close()));
});
const gw = gatewayOnSims({
  config: splitTestConfig(),
  sim: { simDecodeUsPerToken: 1000 },
  // Short engine header timeout so the 504 test runs in seconds; the sims answer non-streaming calls in ms.
  server: { adminToken: ADMIN, maxBodyBytes: 256 * 1024, upstream: { headersTimeoutMs: 3000 } },
});
const { launcher } = gw;

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, json: json as Record<string, unknown>, text };
}

async function get(path: string, headers: Record<string, string> = {}) {
  const r = await fetch(`${gw.url}${path}`, { headers });
  return { status: r.status, headers: r.headers, json: (await r.json()) as Record<string, unknown> };
}

function errorCode(json: unknown): string {
  return ErrorBodySchema.parse(json).error.code;
}

/** A counter summed over the in-process sims of some engines. */
function simStat(engineIds: string[], stat: 'requests' | 'completed'): number {
  return engineIds.reduce((n, id) => n + (launcher.serversOf(id)[0]?.stats()[stat] ?? 0), 0);
}

/** Total generation requests the in-process sims of some engines have seen. */
const simRequests = (engineIds: string[]) => simStat(engineIds, 'requests');

describe('InferenceGateway over HTTP with sglang-sim engines', { timeout: 60_000 }, () => {
  it('serves discovery in the RFC schema, filtered by model, and the legacy Rollout shape on schema=1', async () => {
    const d = await get('/rollout/engines');
    expect(d.status).toBe(200);
    const snap = DiscoverySnapshotSchema.parse(d.json);
    expect(snap.role).toBe('rollout');
    expect(Object.keys(snap.models).sort()).toEqual(['policy', 'policy-code']);
    expect(snap.models.policy?.engines.map((e) => e.engine_id)).toEqual(['policy/0', 'policy/1']);
    expect(snap.models.policy?.engines.every((e) => e.state === 'ready' && e.direct_eligible)).toBe(true);

    const one = await get('/rollout/engines?model_name=policy-code');
    expect(Object.keys(DiscoverySnapshotSchema.parse(one.json).models)).toEqual(['policy-code']);

    const legacy = await get('/rollout/engines?schema=1&model_name=policy');
    const models = legacy.json.models as Record<string, { engine_groups: Array<{ engines: unknown[] }> }>;
    expect(Object.keys(models)).toEqual(['policy']);
    expect(legacy.json.total_engines).toBe(2);
    expect(models.policy?.engine_groups[0]).toMatchObject({
      group_index: 0,
      worker_type: 'regular',
      num_gpus_per_engine: 1,
      num_new_engines: 2,
    });
    expect(models.policy?.engine_groups[0]?.engines[0]).toMatchObject({
      rank: 0,
      status: 'active',
      url: snap.models.policy?.engines[0]?.base_url,
      node_id: 'node-0',
    });

    const bad = await get('/rollout/engines?wait_revision=-3');
    expect(bad.status).toBe(400);
    expect(errorCode(bad.json)).toBe('invalid_query');
  });

  it('long-polls discovery: times out unchanged, and wakes on a publication, not at its timeout', async () => {
    const registry = gw.plane.managers.get('teacher')!.registry;
    const rev = registry.revision;
    const t0 = Date.now();
    const idle = await get(`/teacher/engines?wait_revision=${rev}&timeout_s=0.3`);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(280);
    expect(idle.json.topology_revision).toBe(rev);

    let publishedAt = 0;
    const off = registry.subscribe(() => {
      publishedAt ||= performance.now();
    });
    // The gateway's long-poll subscribes when it parks; publish only then (a fixed sleep raced the request).
    const parked = vi.spyOn(registry, 'subscribe');
    const waiting = fetch(`${gw.url}/teacher/engines?wait_revision=${rev}&timeout_s=20`).then(async (r) => ({
      at: performance.now(),
      json: (await r.json()) as { topology_revision: number; phase: string | null },
    }));
    await waitFor(
      () => parked.mock.calls.length > 0 || undefined,
      15_000,
      'the long-poll parked at the registry',
    );
    parked.mockRestore();
    registry.publish({ phase: 'long-poll-test' });
    const woke = await waiting;
    off();
    expect(woke.json.topology_revision).toBe(rev + 1);
    expect(woke.json.phase).toBe('long-poll-test');
    // Woken by the publication: its timeout is 20 s away. The bound leaves room for a loaded machine's scheduling
    // (the wake itself is one listener call), and is far below any polling a regression could fall back to.
    expect(woke.at - publishedAt).toBeLessThan(1000);
    registry.publish({ phase: null });
  });

  it('answers health with model states (always 200) and the legacy GenRM health on schema=1', async () => {
    const h = await get('/rollout/health');
    expect(h.status).toBe(200);
    expect(h.json).toMatchObject({
      status: 'healthy',
      service: 'rollout',
      instances: { policy: { status: 'healthy' } },
      role: 'rollout',
      can_serve: true,
      models: { policy: { state: 'ready', can_serve: true, replicas: 2, eligible_replicas: 2 } },
    });
    const legacy = await get('/genrm/health?schema=1');
    expect(legacy.json).toEqual({ status: 'healthy', service: 'genrm' });
  });

  it('lists the role models with aliases', async () => {
    const m = await get('/rollout/v1/models');
    const data = m.json.data as Array<{ id: string; root: string; alias_of?: string }>;
    expect(data.map((x) => x.id).sort()).toEqual(['actor', 'policy', 'policy-code']);
    expect(data.find((x) => x.id === 'actor')).toMatchObject({ root: 'policy', alias_of: 'policy' });
  });

  it('forwards /generate without model and route_key, round-robin over replicas, and propagates request ids', async () => {
    const fake = await RecordingEngine.start({ modelPath: '/models/teacher' });
    extras.push(fake);
    const reg = await post(
      '/admin/roles/teacher/models/math-teacher/engines',
      { url: fake.url },
      { authorization: `Bearer ${ADMIN}` },
    );
    expect(reg.status).toBe(200);
    const statuses = [];
    for (let i = 0; i < 2; i++) {
      const r = await post(
        '/teacher/generate',
        { text: 'hello', route_key: 'math', model: 'math-teacher', sampling_params: { max_new_tokens: 3 } },
        { 'x-request-id': `req-${i}` },
      );
      statuses.push(r.status);
      expect(r.headers.get('x-request-id')).toBe(`req-${i}`);
      expect(r.json.text).toEqual(expect.any(String));
    }
    expect(statuses).toEqual([200, 200]);
    const seen = fake.calls('/generate');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.body).not.toHaveProperty('model');
    expect(seen[0]?.body).not.toHaveProperty('route_key');
    expect(seen[0]?.body).toMatchObject({ text: 'hello', sampling_params: { max_new_tokens: 3 } });
    expect(seen[0]?.body?.rid).toEqual(expect.any(String));
  });

  it('serves OPD teacher prefill through the gateway exactly like the raw teacher engine', async () => {
    const inputIds = encode('the teacher scores every token of this response');
    const body = {
      input_ids: inputIds,
      sampling_params: { temperature: 0, max_new_tokens: 0, skip_special_tokens: false },
      return_logprob: true,
      logprob_start_len: 3,
    };
    const via = await post('/teacher/generate', body);
    expect(via.status).toBe(200);
    const direct = await fetch(`${launcher.serversOf('math-teacher/0')[0]?.url}/generate`, {
      method: 'POST',
      body: JSON.stringify(body),
    }).then((r) => r.json() as Promise<{ meta_info: { input_token_logprobs: unknown[] } }>);
    const meta = via.json.meta_info as { input_token_logprobs: unknown[] };
    expect(meta.input_token_logprobs).toHaveLength(inputIds.length - 3);
    expect(meta.input_token_logprobs).toEqual(direct.meta_info.input_token_logprobs);
  });

  it('serves OpenAI chat completions to the official openai client, plain and streaming, at both paths', async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/rollout/v1`, apiKey: 'unused', maxRetries: 0 });
    const plain = await client.chat.completions.create({
      model: 'actor',
      messages: [{ role: 'user', content: 'Say something' }],
      max_tokens: 8,
    });
    expect(plain.choices[0]?.message.content).toEqual(expect.any(String));
    expect(plain.model).toBe('policy');

    const stream = await client.chat.completions.create({
      model: 'policy-code',
      messages: [{ role: 'user', content: 'Stream something' }],
      max_tokens: 12,
      stream: true,
    });
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text.length).toBeGreaterThan(0);

    const relax = await post('/rollout/chat/completions', {
      route_key: 'code',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
    });
    expect(relax.status).toBe(200);
    expect(relax.json.model).toBe('policy-code');
  });

  it('relays a stream unbuffered: the first chunk arrives long before the generation ends', async () => {
    const rollout = ['policy/0', 'policy/1', 'policy-code/0', 'policy-code/1'];
    const completedBefore = simStat(rollout, 'completed');
    const t0 = performance.now();
    const r = await fetch(`${gw.url}/rollout/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({
        messages: [{ role: 'user', content: 'long' }],
        max_tokens: 1500,
        ignore_eos: true,
        stream: true,
      }),
    });
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    const reader = r.body!.getReader();
    await reader.read();
    // The first chunk is here while the engine is still generating: nothing was buffered. (A wall-clock ratio
    // between first chunk and end raced the machine's load.)
    expect(simStat(rollout, 'completed')).toBe(completedBefore);
    while (!(await reader.read()).done);
    const total = performance.now() - t0;
    // 1500 tokens at 1 ms each: the whole stream takes >= 1.5 s.
    expect(total).toBeGreaterThan(1400);
    expect(simStat(rollout, 'completed')).toBe(completedBefore + 1);
  });

  it('feeds its in-flight counts to least_outstanding and to the manager, whose drain waits for them', async () => {
    const manager = gw.plane.managers.get('rollout')!;
    const engines = ['policy/0', 'policy/1'];
    const controller = new AbortController();
    const r = await fetch(`${gw.url}/rollout/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({
        model: 'policy',
        messages: [{ role: 'user', content: 'a long one' }],
        // Long enough (>= 4 s) to outlast the three short requests below on a loaded machine: least_outstanding
        // sends them to the idle replica only while this stream is in flight.
        max_tokens: 4000,
        ignore_eos: true,
        stream: true,
      }),
      signal: controller.signal,
    });
    const reader = r.body!.getReader();
    await reader.read();
    const busy = engines.find((id) => manager.inFlight.count(id) === 1);
    expect(busy).toBeDefined();
    expect(gw.server.gateways.get('rollout')!.inFlight.get(busy!)).toBe(1);
    const idle = engines.find((id) => id !== busy)!;
    const before = simRequests([idle]);
    for (let i = 0; i < 3; i++) {
      const g = await post('/rollout/generate', {
        model: 'policy',
        text: 'short',
        sampling_params: { max_new_tokens: 1 },
      });
      expect(g.status).toBe(200);
    }
    // least_outstanding: every short request went to the replica without the stream.
    expect(simRequests([idle]) - before).toBe(3);

    let streamEnded = 0;
    const rest = (async () => {
      while (!(await reader.read()).done);
      streamEnded = performance.now();
    })();
    const drained = await post(
      '/admin/roles/rollout/models/policy/drain',
      { policy: 'wait', deadline_ms: 60_000 },
      { authorization: `Bearer ${ADMIN}` },
    );
    const drainedAt = performance.now();
    await rest;
    expect(drained.status).toBe(200);
    expect(streamEnded).toBeGreaterThan(0);
    expect(drainedAt).toBeGreaterThanOrEqual(streamEnded);
    expect(manager.inFlight.count(busy!)).toBe(0);
    const refused = await post('/rollout/generate', { model: 'policy', text: 'x' });
    expect(refused.status).toBe(503);
    const back = await post(
      '/admin/roles/rollout/models/policy/activate',
      {},
      { authorization: `Bearer ${ADMIN}` },
    );
    expect(back.status).toBe(200);
  });

  it('answers the GenRM messages adapter with {"response"} stripped, and forwards raw GenRM generate', async () => {
    const r = await post('/genrm/generate', {
      messages: [{ role: 'user', content: 'Is 2 + 2 = 4? Answer with a judgement.' }],
      sampling_params: { max_new_tokens: 16 },
    });
    expect(r.status).toBe(200);
    expect(Object.keys(r.json)).toEqual(['response']);
    const text = r.json.response as string;
    expect(text.length).toBeGreaterThan(0);
    expect(text).toBe(text.trim());

    const raw = await post('/genrm/generate', { text: 'raw prompt', sampling_params: { max_new_tokens: 2 } });
    expect(raw.status).toBe(200);
    expect(raw.json.text).toEqual(expect.any(String));

    // Relax's statuses: a bad conversation is 422, messages mixed with raw generation or streaming 400.
    const bad = await post('/genrm/generate', { messages: [] });
    expect(bad.status).toBe(422);
    expect(errorCode(bad.json)).toBe('invalid_genrm_messages');
    const nulled = await post('/genrm/generate', { messages: null });
    expect(nulled.status).toBe(422);
    for (const mixed of [{ text: 'x' }, { input_ids: [1, 2] }, { stream: true }]) {
      const r = await post('/genrm/generate', {
        messages: [{ role: 'user', content: 'hi' }],
        ...mixed,
      });
      expect(r.status).toBe(400);
      expect(errorCode(r.json)).toBe('invalid_body');
    }
  });

  it('refuses bad requests with 400 / 404 / 413 JSON errors that name the problem', async () => {
    const unknown = await post('/rollout/generate', { model: 'nope', text: 'x' });
    expect(unknown.status).toBe(400);
    expect(errorCode(unknown.json)).toBe('model_not_served');
    const key = await post('/rollout/generate', { route_key: 'nope', text: 'x' });
    expect(key.status).toBe(400);
    expect(errorCode(key.json)).toBe('unknown_route_key');
    const json = await post('/rollout/v1/chat/completions', '{"messages": [');
    expect(json.status).toBe(400);
    expect(errorCode(json.json)).toBe('invalid_json');
    const big = await post('/rollout/generate', { text: 'x'.repeat(300 * 1024) });
    expect(big.status).toBe(413);
    expect(errorCode(big.json)).toBe('body_too_large');
    const notFound = await get('/rollout/nothing-here');
    expect(notFound.status).toBe(404);
  });

  it('aborts the engine request (/abort_request with its rid) when the client disconnects mid-stream', async () => {
    const fake = extras[0]!;
    // Teacher round-robins between its sim and the recording engine: stream until one lands on the recorder.
    for (let i = 0; i < 2 && fake.calls('/v1/chat/completions').length === 0; i++) {
      const controller = new AbortController();
      const r = await fetch(`${gw.url}/teacher/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({
          route_key: 'math',
          messages: [{ role: 'user', content: 'go' }],
          max_tokens: 3000,
          stream: true,
        }),
        signal: controller.signal,
      });
      const reader = r.body!.getReader();
      await reader.read();
      controller.abort();
      await reader.read().catch(() => undefined);
    }
    const chat = fake.calls('/v1/chat/completions')[0];
    expect(chat).toBeDefined();
    // The chat body reaches the engine with the served model name and without the gateway's route_key.
    expect(chat?.body?.model).toBe('math-teacher');
    expect(chat?.body).not.toHaveProperty('route_key');
    const rid = chat?.body?.rid;
    expect(rid).toEqual(expect.any(String));
    const abort = await waitFor(
      () => fake.calls('/abort_request').find((c) => c.body?.rid === rid),
      15_000,
      'abort_request at the engine',
    );
    expect(abort.body).toEqual({ rid });
    const metrics = await fetch(`${gw.url}/metrics`).then((r) => r.text());
    // Counted under the request's model (looked up before the request's end forgets it), as the abort's engine key is.
    expect(metrics).toMatch(/uis_client_aborts_total\{role="teacher",model="math-teacher"\} [1-9]/);
    expect(metrics).toMatch(
      /uis_aborted_requests_total\{role="teacher",model="math-teacher",reason="client_disconnect"\} [1-9]/,
    );
  });

  it('aborts the GenRM adapter call at the engine when its client disconnects', async () => {
    const fake = await RecordingEngine.start({ modelPath: '/models/judge', simDecodeUsPerToken: 1000 });
    extras.push(fake);
    const reg = await post(
      '/admin/roles/genrm/models/judge/engines',
      { url: fake.url },
      { authorization: `Bearer ${ADMIN}` },
    );
    expect(reg.status).toBe(200);
    for (let i = 0; i < 2 && fake.calls('/v1/chat/completions').length === 0; i++) {
      const controller = new AbortController();
      const atFake = fake.calls('/v1/chat/completions').length;
      const atSim = simRequests(['judge/0']);
      const pending = fetch(`${gw.url}/genrm/generate`, {
        method: 'POST',
        body: JSON.stringify({
          messages: [{ role: 'user', content: 'judge slowly' }],
          sampling_params: { max_new_tokens: 3000, ignore_eos: true },
        }),
        signal: controller.signal,
      }).catch(() => undefined);
      // Disconnect once an engine has the call (a fixed sleep could abort before it got there).
      await waitFor(
        () =>
          fake.calls('/v1/chat/completions').length > atFake || simRequests(['judge/0']) > atSim || undefined,
        15_000,
        'the GenRM call at an engine',
      );
      controller.abort();
      await pending;
    }
    const chat = fake.calls('/v1/chat/completions')[0];
    expect(chat?.body).toMatchObject({ model: 'judge', max_tokens: 3000, temperature: 0.5, top_k: -1 });
    expect(chat?.body?.chat_template_kwargs).toEqual({ enable_thinking: false });
    const rid = chat?.body?.rid;
    expect(rid).toEqual(expect.any(String));
    await waitFor(
      () => fake.calls('/abort_request').find((c) => c.body?.rid === rid),
      15_000,
      'abort_request at the GenRM engine',
    );
    const un = await post(
      '/admin/roles/genrm/engines/unregister',
      { engine_id: (reg.json.result as { engine_id: string }).engine_id },
      { authorization: `Bearer ${ADMIN}` },
    );
    expect(un.status).toBe(200);
  });

  it('times out a hung engine with 504 and keeps serving from the other replica', async () => {
    const fake = extras[0]!;
    fake.hang = true;
    const results = [];
    for (let i = 0; i < 2; i++) {
      const r = await post('/teacher/generate', { text: 'x', sampling_params: { max_new_tokens: 2 } });
      results.push(r.status === 504 ? errorCode(r.json) : r.status);
    }
    fake.hang = false;
    expect(results.sort()).toEqual([200, 'engine_timeout'].sort());
  });

  it('retries an unreachable replica once on another one, and answers 502 when none is reachable', async () => {
    const fake = extras[0]!;
    await fake.close();
    const before = fake.calls('/generate').length;
    for (let i = 0; i < 2; i++) {
      const r = await post('/teacher/generate', { text: 'retry', sampling_params: { max_new_tokens: 2 } });
      expect(r.status).toBe(200);
    }
    expect(fake.calls('/generate').length).toBe(before);
    const metrics = await fetch(`${gw.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(
      /uis_upstream_retries_total\{role="teacher",model="[^"]+",reason="engine_unreachable"\} [1-9]/,
    );
    await launcher.serversOf('math-teacher/0')[0]?.close();
    const r = await post('/teacher/generate', { text: 'none left', sampling_params: { max_new_tokens: 2 } });
    expect(r.status).toBe(502);
    expect(errorCode(r.json)).toBe('engine_unreachable');
  });

  it('answers 503 + Retry-After for a sleeping model, and no engine sees the request', async () => {
    const judge = ['judge/0'];
    // Resolved while ready first: the drain's publish must not leave that resolution in use.
    const ready = await post('/genrm/generate', { text: 'raw', sampling_params: { max_new_tokens: 1 } });
    expect(ready.status).toBe(200);
    const drained = await post('/admin/roles/genrm/drain', {}, { authorization: `Bearer ${ADMIN}` });
    expect(drained.status).toBe(200);
    const before = simRequests(judge);
    const r = await post('/genrm/generate', { messages: [{ role: 'user', content: 'score me' }] });
    expect(r.status).toBe(503);
    expect(errorCode(r.json)).toBe('model_not_ready');
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    const raw = await post('/genrm/generate', { text: 'raw', sampling_params: { max_new_tokens: 1 } });
    expect(raw.status).toBe(503);
    expect(raw.headers.get('retry-after')).toBe('30');
    const chat = await post('/genrm/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] });
    expect(chat.status).toBe(503);
    expect(chat.headers.get('retry-after')).not.toBeNull();
    expect(simRequests(judge)).toBe(before);
    const h = await get('/genrm/health');
    expect(h.status).toBe(200);
    expect(h.json).toMatchObject({
      can_serve: false,
      models: { judge: { state: 'sleeping', can_serve: false } },
    });
    expect((await get('/genrm/health?schema=1')).json).toEqual({ status: 'unhealthy', service: 'genrm' });
    // Requests never woke it.
    expect(gw.plane.managers.get('genrm')!.snapshot().models.judge?.replicas[0]?.state).toBe('sleeping');
  });

  it('counts requests by role, model and status in /metrics', async () => {
    const text = await fetch(`${gw.url}/metrics`).then((r) => r.text());
    expect(text).toMatch(/uis_requests_total\{role="rollout",model="policy",status="200"\} \d+/);
    expect(text).toMatch(/uis_requests_total\{role="genrm",model="judge",status="503"\} \d+/);
    expect(text).toMatch(/uis_time_to_first_token_seconds_count\{role="rollout",model="policy"\} \d+/);
    expect(text).toMatch(/uis_replicas\{role="genrm",model="judge",state="sleeping"\} 1/);
    expect(text).toMatch(/uis_topology_revision\{role="rollout"\} \d+/);
  });
});
