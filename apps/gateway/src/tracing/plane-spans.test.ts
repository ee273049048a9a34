import { waitFor } from '@uis/sglang-engine/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';
import { type CollectedSpan, childNames, startCollector } from '../testing/otlp-collector.ts';

const collector = await startCollector();
afterAll(() => collector.close());
const tracing = await collector.tracing();
const ADMIN = 'plane-spans-admin-token';
const gw = gatewayOnSims({ config: deferTestConfig(), server: { adminToken: ADMIN, tracing } });

async function admin(path: string, body: unknown): Promise<{ status: number; result: unknown }> {
  const r = await fetch(`${gw.url}/admin${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
    body: JSON.stringify(body),
  });
  const json = (await r.json()) as { result?: unknown };
  return { status: r.status, result: json.result };
}

/** The spans of the transition whose root names `to`, once exported. */
async function transitionTo(to: string): Promise<{ spans: CollectedSpan[]; root: CollectedSpan }> {
  const isIt = (s: CollectedSpan) => s.name === 'uis.phase_transition' && s.attributes['uis.to'] === to;
  const spans = await collector.flushed(tracing, (all) => all.some(isIt));
  return { spans, root: spans.find(isIt)! };
}

const under = (spans: CollectedSpan[], parent: CollectedSpan, name: string) =>
  spans.filter((s) => s.parentSpanId === parent.spanId && s.name === name);

describe('OpenTelemetry spans of the control plane', { timeout: 120_000 }, () => {
  it('exports a weight update with one child per replica', async () => {
    const r = await admin('/roles/rollout/models/policy/weights', {
      source: 'version',
      weight_version: 'v2',
    });
    expect(r.status).toBe(200);
    const spans = await collector.flushed(tracing, (s) => s.some((x) => x.name === 'uis.weight_update'));
    const root = spans.find((s) => s.name === 'uis.weight_update')!;
    expect(root.attributes).toMatchObject({
      'uis.model': 'policy',
      'uis.role': 'rollout',
      'uis.weight_source': 'version',
      'uis.weight_version': 'v2',
      'uis.replicas': 2,
      'uis.replicas_failed': 0,
    });
    expect(root.parentSpanId).toBeUndefined();
    const replicas = under(spans, root, 'uis.weight_update.replica');
    expect(replicas.map((s) => s.attributes['uis.replica']).sort()).toEqual(['policy/0', 'policy/1']);
    for (const s of replicas) expect(s.endMs).toBeLessThanOrEqual(root.endMs);
    // The command's own audit record of the same call makes no second span.
    expect(spans.filter((s) => s.name === 'uis.weight_update')).toHaveLength(1);
  });

  it('exports a phase transition: release, onload, the batches part with one span per batch run, barrier waits', async () => {
    const batch = await admin('/batches', {
      kind: 'genrm_score',
      samples: [
        { sample_id: 's0', input: { messages: [{ role: 'user', content: 'Judge this. Judgement:' }] } },
      ],
    });
    expect(batch.status).toBe(200);
    const batchId = (batch.result as { id: string }).id;
    // A trainer waits for `train` while the group moves there.
    const waiting = admin('/barriers/wait', { phase: 'train', group: 'actor', timeout_s: 60 });
    await waitFor(() => gw.plane.barriers.list().length > 0, 10_000, 'the trainer to wait at the barrier');
    const r = await admin('/phases/advance', { group: 'actor' });
    expect(r.status).toBe(200);
    expect((r.result as { path: string[] }).path).toEqual(['genrm_score', 'teacher_score', 'train']);
    expect((await waiting).status).toBe(200);

    const { spans, root } = await transitionTo('train');
    expect(root.attributes).toMatchObject({
      'uis.group': 'actor',
      'uis.from': 'rollout',
      'uis.outcome': 'ok',
    });
    expect(root.parentSpanId).toBeUndefined();
    const parts = childNames(spans, root);
    for (const part of ['uis.transition.release', 'uis.transition.onload', 'uis.transition.batches'])
      expect(parts).toContain(part);
    // The barrier wait covered the whole transition.
    const [wait] = under(spans, root, 'uis.barrier_wait');
    expect(wait?.attributes).toMatchObject({ 'uis.barrier.phase': 'train', 'uis.barrier.waiting': 1 });
    expect(wait!.endMs - wait!.startMs).toBeGreaterThan(0);

    const batches = under(spans, root, 'uis.transition.batches').find(
      (s) => s.attributes['uis.phase'] === 'genrm_score',
    )!;
    const runs = under(spans, batches, 'uis.batch_run');
    expect(runs).toHaveLength(1);
    expect(runs[0]!.attributes).toMatchObject({
      'uis.batch.id': batchId,
      'uis.batch.kind': 'genrm_score',
      'uis.role': 'genrm',
      'uis.batch.outcome': 'committed',
      'uis.batch.samples': 1,
    });
    expect(runs[0]!.startMs).toBeGreaterThanOrEqual(batches.startMs);
    expect(runs[0]!.endMs).toBeLessThanOrEqual(batches.endMs);
  });

  it('exports the weight syncs of replicas that onload behind their model under the onload part', async () => {
    // Rollout sleeps (the group is at train): the update moves the target; the replicas catch up when they onload.
    const r = await admin('/roles/rollout/models/policy/weights', {
      source: 'version',
      weight_version: 'v3',
    });
    expect(r.status).toBe(200);
    expect((await admin('/barriers/release', { phase: 'train', group: 'actor' })).status).toBe(200);
    const { spans, root } = await transitionTo('rollout');
    const [onload] = under(spans, root, 'uis.transition.onload');
    const syncs = under(spans, onload!, 'uis.weight_sync');
    expect(syncs.map((s) => s.attributes['uis.replica']).sort()).toEqual(['policy/0', 'policy/1']);
    for (const s of syncs) expect(s.attributes['uis.weight_version']).toBe('v3');
    // No barrier was waited on during this one.
    expect(under(spans, root, 'uis.barrier_wait')).toEqual([]);
  });
});
