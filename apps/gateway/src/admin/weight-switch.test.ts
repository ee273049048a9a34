import type { WeightSwitchRecord } from '@uis/manager';
import type { DiscoverySnapshot } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// The weight switch through the admin REST door: one operation per model, each mode, quarantine, rollback, and one
// switch at a time (409, or queued behind the running one by an idempotency key).
const TOKEN = 'admin-token-switch';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const gw = gatewayOnSims({
  config: singleRolloutConfig(4),
  sim: { simDecodeUsPerToken: 2000 },
  server: { adminToken: TOKEN, healthProbeMs: 0 },
});

const SWITCH = '/admin/roles/rollout/models/policy/weights/switch';

interface Answer {
  result: WeightSwitchRecord;
  error: { code: string; path: string };
}

async function post(path: string, body: unknown, headers: Record<string, string> = AUTH) {
  const r = await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as Answer };
}

function update(version: string) {
  return { source: 'disk', model_path: `/ckpt/${version}`, weight_version: version };
}

async function discovery(): Promise<DiscoverySnapshot> {
  return (await (await fetch(`${gw.url}/rollout/engines`)).json()) as DiscoverySnapshot;
}

function generate(tokens: number, stream = false) {
  return fetch(`${gw.url}/rollout/generate`, {
    method: 'POST',
    body: JSON.stringify({
      text: 'x',
      stream,
      sampling_params: { max_new_tokens: tokens, ignore_eos: true },
    }),
  }).then(async (r) => ({
    status: r.status,
    text: await r.text(),
    version: r.headers.get('x-uis-weight-version'),
    versions: r.headers.get('x-uis-weight-versions'),
  }));
}

describe('weight switch', { timeout: 120_000 }, () => {
  it.each(['drain', 'pause_in_place', 'abort'] as const)(
    '%s: every replica moves to the new version once, under requests in flight',
    async (mode) => {
      const version = `v-${mode}`;
      const before = (await discovery()).topology_revision;
      const from = (await discovery()).models.policy?.weight_version;
      const running = Array.from({ length: 6 }, () => generate(150));
      const inFlight = gw.plane.managerOf('rollout').inFlight;
      await expect.poll(() => inFlight.total(), { timeout: 10_000 }).toBe(6);
      const res = await post(SWITCH, { mode, update: update(version) });
      expect(res.status).toBe(200);
      const rec = res.json.result;
      expect(rec).toMatchObject({ mode, outcome: 'switched', weight_version: version, quarantined: [] });
      expect(rec.engines).toHaveLength(4);
      for (const e of rec.engines) expect(e).toMatchObject({ ok: true, weight_version: version });
      // Where the switch's time went, phase by phase, in the order they run (continue and publish side by side).
      const p = rec.phases_ms;
      const order = [p.stopped, p.loaded, p.read_back, p.committed, Math.min(p.continued, p.published)];
      expect(order).toEqual([...order].sort((x, y) => x - y));
      expect(Math.max(p.continued, p.published)).toBeLessThanOrEqual(rec.duration_ms);
      expect(rec.slowest_update_ms).toBeLessThanOrEqual(p.read_back);
      const answers = await Promise.all(running);
      for (const a of answers) expect(a.status).toBe(200);
      const finish = answers.map((a) => JSON.parse(a.text).meta_info.finish_reason.type);
      // Abort ends in-flight requests with their partial output; the other modes let them finish.
      if (mode === 'abort') expect(finish).toContain('abort');
      else expect(finish.every((f) => f === 'length')).toBe(true);
      // Each answer names the version of its last token; only an in-place switch lets a request span two, and
      // its body says at which output token the version changed (SGLang's spans, passed on as the engine sent
      // them); the headers name the same versions.
      for (const a of answers) {
        const meta = JSON.parse(a.text).meta_info;
        const spans = meta.weight_versions as Array<{ version: string; start: number; end: number }>;
        const produced = meta.weight_version;
        expect(a.version).toBe(produced);
        expect(spans[0]?.start).toBe(0);
        expect(spans[spans.length - 1]?.end).toBe(meta.completion_tokens);
        for (let i = 1; i < spans.length; i++) expect(spans[i]?.start).toBe(spans[i - 1]?.end);
        const named = spans.map((x) => x.version);
        expect(a.versions).toBe(named.length > 1 ? named.join(',') : null);
        if (mode === 'pause_in_place') {
          expect(produced).toBe(version);
          expect(named[named.length - 1]).toBe(version);
          expect([[version], [from, version]]).toContainEqual(named);
        } else {
          expect(produced).toBe(from);
          expect(named).toEqual([from]);
        }
      }
      // Requests that made tokens before the pause span both versions.
      if (mode === 'pause_in_place')
        expect(answers.some((a) => JSON.parse(a.text).meta_info.weight_versions.length === 2)).toBe(true);
      const snap = await discovery();
      expect(snap.topology_revision).toBe(before + 1);
      expect(snap.models.policy?.weight_version).toBe(version);
      expect(
        snap.models.policy?.engines.every((e) => e.weight_version === version && e.direct_eligible),
      ).toBe(true);
    },
  );

  it('an OpenAI answer carries the version that produced it as system_fingerprint', async () => {
    const r = await fetch(`${gw.url}/rollout/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'policy', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    const body = (await r.json()) as { system_fingerprint: string; metadata: { weight_version: string } };
    const version = (await discovery()).models.policy?.weight_version;
    expect(body.system_fingerprint).toBe(version);
    expect(body.metadata.weight_version).toBe(version);
    expect(r.headers.get('x-uis-weight-version')).toBe(version);
  });

  it('quarantines the replica whose update fails; the rest finish on the new version', async () => {
    const victim = 'policy/2';
    gw.launcher.serversOf(victim)[0]?.failWeightUpdates(1);
    const res = await post(SWITCH, { mode: 'pause_in_place', update: update('v-q') });
    expect(res.status).toBe(200);
    expect(res.json.result).toMatchObject({
      outcome: 'quarantined',
      weight_version: 'v-q',
      quarantined: [victim],
    });
    const failed = res.json.result.engines.find((e) => e.engine_id === victim);
    expect(failed?.error).toMatch(/injected fault/);
    const snap = await discovery();
    const engine = snap.models.policy?.engines.find((e) => e.engine_id === victim);
    expect(engine).toMatchObject({ quarantined: true, direct_eligible: false });
    // Never routed to: a batch of requests all land elsewhere.
    const served = await Promise.all(
      Array.from({ length: 12 }, () =>
        fetch(`${gw.url}/rollout/generate`, {
          method: 'POST',
          body: JSON.stringify({ text: 'y', sampling_params: { max_new_tokens: 1 } }),
        }).then((r) => r.headers.get('x-uis-engine-id')),
      ),
    );
    expect(served).not.toContain(victim);
    // An operator restart lifts the quarantine; the replica comes back at the model's version.
    expect((await post('/admin/roles/rollout/engines/restart', { engine_id: victim })).status).toBe(200);
  });

  it('rolls every replica back when asked to, quarantining only the failed one', async () => {
    const snap = await discovery();
    await expect
      .poll(async () => (await discovery()).models.policy?.engines.filter((e) => e.direct_eligible).length, {
        timeout: 30_000,
      })
      .toBe(4);
    const from = snap.models.policy?.weight_version;
    gw.launcher.serversOf('policy/1')[0]?.failWeightUpdates(1);
    const res = await post(SWITCH, { mode: 'abort', on_failure: 'rollback', update: update('v-rb') });
    expect(res.status).toBe(200);
    expect(res.json.result).toMatchObject({
      outcome: 'rolled_back',
      weight_version: from,
      quarantined: ['policy/1'],
    });
    const after = await discovery();
    expect(after.models.policy?.weight_version).toBe(from);
    for (const e of after.models.policy?.engines ?? [])
      if (e.engine_id !== 'policy/1')
        expect(e).toMatchObject({ weight_version: from, direct_eligible: true });
    await post('/admin/roles/rollout/engines/restart', { engine_id: 'policy/1' });
    await expect
      .poll(async () => (await discovery()).models.policy?.engines.filter((e) => e.direct_eligible).length, {
        timeout: 30_000,
      })
      .toBe(4);
  });

  it('refuses a second switch while one runs (409), or queues it behind with an idempotency key', async () => {
    const long = Array.from({ length: 4 }, () => generate(400));
    const first = post(SWITCH, { mode: 'drain', update: update('v-a') });
    await expect
      .poll(() => gw.plane.managerOf('rollout').switching('policy'), { timeout: 10_000 })
      .toBe(true);
    const refused = await post(SWITCH, { mode: 'abort', update: update('v-b') });
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe('weight_switch_in_progress');
    const queued = post(
      SWITCH,
      { mode: 'abort', update: update('v-c') },
      { ...AUTH, 'idempotency-key': 'sw-c' },
    );
    expect((await first).json.result.weight_version).toBe('v-a');
    expect((await queued).json.result).toMatchObject({
      outcome: 'switched',
      from_version: 'v-a',
      weight_version: 'v-c',
    });
    await Promise.all(long);
    const history = await fetch(`${gw.url}/admin/roles/rollout/models/policy/weights/switches`, {
      headers: AUTH,
    }).then((r) => r.json() as Promise<{ result: { switches: Array<{ to_version: string }> } }>);
    expect(history.result.switches.map((h) => h.to_version)).toEqual(
      expect.arrayContaining(['v-drain', 'v-pause_in_place', 'v-abort', 'v-q', 'v-rb', 'v-a', 'v-c']),
    );
  });

  it('answers a bad switch body with the path of what is wrong', async () => {
    const bad = await post(SWITCH, { mode: 'sideways', update: update('v-x') });
    expect(bad.status).toBe(400);
    expect(bad.json.error.path).toMatch(/mode/);
    const noVersion = await post(SWITCH, { mode: 'abort', update: { source: 'disk', model_path: '/m' } });
    expect(noVersion.status).toBe(400);
    expect(noVersion.json.error.path).toMatch(/update\.weight_version/);
  });

  it('switches from serialized tensors (update_weights_from_tensor), one payload list per replica, or refuses first', async () => {
    const snap = await discovery();
    const from = snap.models.policy?.weight_version;
    const ids = (snap.models.policy?.engines ?? []).map((e) => e.engine_id);
    expect(ids).toHaveLength(4);
    // One payload per TP rank (tp 1 here), base64 as SGLang's MultiprocessingSerializer gives it over HTTP.
    const payload = (id: string) => [Buffer.from(`tensors of ${id}`).toString('base64')];
    const perEngine = Object.fromEntries(ids.map((id) => [id, payload(id)]));
    const tensor = (extra: Record<string, unknown>) => ({
      mode: 'pause_in_place',
      update: { source: 'tensor', weight_version: 'v-tensor', ...extra },
    });
    // Refused before any replica is touched: each with the path of what is wrong.
    // Refused before any replica is touched: a body the schema refuses (invalid_input), or one some replica
    // cannot take (invalid_weight_update), each with the path of what is wrong.
    for (const [body, code, path] of [
      [
        tensor({ per_engine: { ...perEngine, [ids[0] as string]: undefined } }),
        'invalid_weight_update',
        `update.per_engine.${ids[0]}`,
      ],
      [
        tensor({ per_engine: { ...perEngine, 'rollout/nope': payload('x') } }),
        'invalid_weight_update',
        'update.per_engine.rollout/nope',
      ],
      [
        tensor({ serialized_named_tensors: [...payload('a'), ...payload('b')] }),
        'invalid_weight_update',
        'update.serialized_named_tensors',
      ],
      [
        tensor({ serialized_named_tensors: ['not base64!'] }),
        'invalid_input',
        'update.serialized_named_tensors[0]',
      ],
      [
        tensor({ per_engine: perEngine, serialized_named_tensors: payload('a') }),
        'invalid_input',
        'update.serialized_named_tensors',
      ],
    ] as const) {
      const r = await post(SWITCH, JSON.parse(JSON.stringify(body)));
      expect([r.status, r.json.error.code, r.json.error.path]).toEqual([
        400,
        code,
        expect.stringContaining(path),
      ]);
    }
    expect((await discovery()).models.policy?.weight_version).toBe(from);
    const res = await post(SWITCH, tensor({ per_engine: perEngine }));
    expect(res.status).toBe(200);
    expect(res.json.result).toMatchObject({
      outcome: 'switched',
      from_version: from,
      weight_version: 'v-tensor',
    });
    for (const e of res.json.result.engines)
      expect(e).toMatchObject({ ok: true, weight_version: 'v-tensor' });
    const after = await discovery();
    expect(after.models.policy?.weight_version).toBe('v-tensor');
    expect(
      after.models.policy?.engines.every((e) => e.weight_version === 'v-tensor' && e.direct_eligible),
    ).toBe(true);
  });
});
