import { DiscoverySnapshotSchema, ErrorBodySchema } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';

const TOKEN = 'admin-token-for-hold-tests';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const gw = gatewayOnSims({
  config: deferTestConfig(),
  server: { adminToken: TOKEN },
  sim: { simOnloadMs: 20, simOffloadMs: 20 },
});

async function post(path: string, body: unknown = {}) {
  const r = await fetch(`${gw.url}${path}`, { method: 'POST', headers: AUTH, body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}
async function model(role: string, name: string) {
  const snap = DiscoverySnapshotSchema.parse(await (await fetch(`${gw.url}/${role}/engines`)).json());
  return snap.models[name];
}
const phase = () => gw.plane.coordinator.lease('actor').phase;
/** One full RL step of the schedule: rollout -> genrm_score -> teacher_score -> train -> rollout. */
async function cycle() {
  expect((await post('/admin/phases/advance', { group: 'actor' })).status).toBe(200);
  expect(phase()).toBe('train');
  expect((await post('/admin/barriers/release', { group: 'actor', phase: 'train' })).status).toBe(200);
  expect(phase()).toBe('rollout');
}

describe("an operator's drain and activation on time-shared GPUs", { timeout: 90_000 }, () => {
  it('a drained model stays out of service across phase changes until the operator activates it', async () => {
    expect(phase()).toBe('rollout');
    expect((await post('/admin/roles/rollout/models/policy/drain')).status).toBe(200);
    expect(await model('rollout', 'policy')).toMatchObject({ state: 'sleeping', held: true });

    // A whole RL step later the schedule is back at rollout, and the model is still drained.
    await cycle();
    expect(await model('rollout', 'policy')).toMatchObject({ state: 'sleeping', held: true });
    const refused = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 1 } }),
    });
    expect(refused.status).toBe(503);
    expect(ErrorBodySchema.parse(await refused.json()).error.message).toContain('an operator drained it');

    // In its phase, the operator's activation onloads it now.
    const on = await post('/admin/roles/rollout/models/policy/activate');
    expect(on).toMatchObject({ status: 200, json: { result: { onloaded: true } } });
    const back = await model('rollout', 'policy');
    expect(back?.state).toBe('ready');
    expect(back?.held).toBeUndefined();
  });

  it('never onloads a role onto GPUs another phase holds: a model waits for its phase, a role is refused', async () => {
    expect(phase()).toBe('rollout');
    // GenRM's phase is not resident: its GPUs belong to rollout now.
    expect((await post('/admin/roles/genrm/models/judge/drain')).status).toBe(200);
    expect(await model('genrm', 'judge')).toMatchObject({ state: 'sleeping', held: true });
    const role = await post('/admin/roles/genrm/activate');
    expect(role.status).toBe(409);
    expect(ErrorBodySchema.parse(role.json).error).toMatchObject({
      code: 'phase_not_resident',
      path: 'role',
    });
    const one = await post('/admin/roles/genrm/models/judge/activate');
    expect(one).toMatchObject({
      status: 200,
      json: {
        result: { onloaded: false, waits_for: { group: 'actor', phase: 'rollout', phases: ['genrm_score'] } },
      },
    });
    // Nothing onloaded; the hold is lifted, so the model comes back with its phase.
    expect(await model('genrm', 'judge')).toMatchObject({ state: 'sleeping' });
    expect((await model('genrm', 'judge'))?.held).toBeUndefined();
    expect(await model('rollout', 'policy')).toMatchObject({ state: 'ready' });
    let inItsPhase: string | undefined;
    const off = gw.plane.coordinator.registerPhaseTask('genrm_score', async () => {
      inItsPhase = (await model('genrm', 'judge'))?.state;
    });
    try {
      await cycle();
    } finally {
      off();
    }
    expect(inItsPhase).toBe('ready');
  });

  it('a batch of a held scorer blocks its phase with the hold as the reason; nothing is lost', async () => {
    expect(phase()).toBe('rollout');
    expect((await post('/admin/roles/genrm/models/judge/drain')).status).toBe(200);
    const batch = await post('/admin/batches', {
      kind: 'genrm_score',
      samples: [{ sample_id: 's0', input: { messages: [{ role: 'user', content: 'Judgement:' }] } }],
    });
    expect(batch.status).toBe(200);
    const advance = await post('/admin/phases/advance', { group: 'actor' });
    expect(advance.status).toBeGreaterThanOrEqual(500);
    const lease = gw.plane.coordinator.lease('actor');
    expect(lease.status).toBe('blocked');
    expect(lease.reason).toContain('model judge is held: an operator drained it');
    // The batch waits, sealed, for the next scorer phase.
    const id = (batch.json.result as { id: string }).id;
    expect(gw.plane.store.get(id).state).toBe('sealed');
  });
});
