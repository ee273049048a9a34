import { SGLangClient } from '@uis/sglang-engine';
import type { SimServer } from '@uis/sglang-sim';
import { type InferenceRoleSpec, isUisError, type Role } from '@uis/spec';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BatchStore, type TeacherOutput } from './batch-store.ts';
import { wireDeferredScoring } from './deferred-scoring.ts';
import { EventLog } from './event-log.ts';
import { InferenceManager } from './inference-manager.ts';
import { SimLauncher } from './launchers.ts';
import { LifecycleCoordinator } from './lifecycle-coordinator.ts';
import { boxedScore, verdictScore } from './score-parsers.ts';
import { openStore } from './store.ts';
import { deferConfig, expectedGenrmOutputs, planConfig, startModelSim } from './testing.ts';

const FAST = { healthIntervalMs: 200, failuresToDead: 3, startDeadlineMs: 60_000, drainDeadlineMs: 10_000 };
const JUDGE_SAMPLING = { max_new_tokens: 48 };

const genrmSamples = Array.from({ length: 6 }, (_, i) => ({
  sample_id: `g${i}`,
  input: {
    messages: [
      { role: 'system' as const, content: 'You are a strict judge.' },
      { role: 'user' as const, content: `Question ${i}: is the river blue? Answer: the river is blue ${i}` },
    ],
    sampling_params: JUDGE_SAMPLING,
  },
}));
const teacherSamples = Array.from({ length: 4 }, (_, i) => {
  const ids = Array.from({ length: 10 + i }, (_, j) => 259 + ((i * 7 + j * 3) % 60));
  return { sample_id: `t${i}`, input: { input_ids: ids, logprob_start_len: 4, response_length: 5 } };
});

/** Reference engines: in-process sims with the same model path and served name as the scorer replicas; the
 * expected outputs come from calling them directly, outside the manager, coordinator and batch runner. */
let judgeRef: SimServer;
let teacherRef: SimServer;
beforeAll(async () => {
  judgeRef = await startModelSim('judge');
  teacherRef = await startModelSim('teacher');
});
afterAll(async () => {
  await judgeRef?.close();
  await teacherRef?.close();
});

async function expectedTeacher(): Promise<TeacherOutput[]> {
  const c = new SGLangClient(teacherRef.url);
  const out: TeacherOutput[] = [];
  for (const s of teacherSamples) {
    const r = await c.generate({
      input_ids: s.input.input_ids,
      sampling_params: { temperature: 0, max_new_tokens: 0 },
      return_logprob: true,
      logprob_start_len: 4,
    });
    const lps = r.meta_info.input_token_logprobs ?? [];
    const sel = lps.slice(lps.length - 5);
    out.push({ logprobs: sel.map((x) => x[0]), token_ids: sel.map((x) => x[1]) });
  }
  await c.close();
  return out;
}

const managers: InferenceManager[] = [];
afterEach(async () => {
  await Promise.allSettled(managers.splice(0).map((m) => m.shutdown()));
});

async function deferStack(scoreParser = verdictScore, startPhases = false) {
  const { plan, roles } = planConfig(deferConfig());
  const db = openStore();
  const events = new EventLog(db);
  const ms = {} as Record<Role, InferenceManager>;
  for (const r of ['rollout', 'genrm', 'teacher'] as const) {
    ms[r] = new InferenceManager({
      role: roles[r] as InferenceRoleSpec,
      placements: plan.placements,
      pools: plan.pools,
      launcher: new SimLauncher(),
      events,
      options: FAST,
    });
    managers.push(ms[r]);
  }
  if (!startPhases) await Promise.all(Object.values(ms).map((m) => m.start()));
  const group = plan.activation_groups[0];
  if (!group) throw new Error('defer plan has no activation group');
  const coordinator = new LifecycleCoordinator({
    groups: plan.activation_groups,
    participants: Object.values(ms),
    db,
    events,
    registries: Object.values(ms).map((m) => m.registry),
    transitionTimeoutMs: 60_000,
  });
  const store = new BatchStore(db);
  wireDeferredScoring({
    coordinator,
    store,
    managers: ms,
    phases: group.phases,
    runner: { concurrency: 3, scoreParser },
  });
  if (startPhases) await coordinator.startPhases();
  else await coordinator.initialize();
  return { ms, coordinator, store, events };
}

describe('defer layout: the full defer cycle against sglang-sim processes', () => {
  it('rollout -> GenRM scoring -> teacher OPD logprobs -> train barrier, outputs written back exactly', async () => {
    const [wantGenrm, wantTeacher] = await Promise.all([
      expectedGenrmOutputs(judgeRef.url, genrmSamples, verdictScore),
      expectedTeacher(),
    ]);
    const { ms, coordinator, store, events } = await deferStack();
    const state = (r: Role) => ms[r].registry.snapshot().models;
    expect(state('rollout').policy?.state).toBe('ready');
    expect(state('genrm').judge?.state).toBe('sleeping');
    expect(state('teacher').teacher?.state).toBe('sleeping');

    // Rollout stores scoring inputs instead of calling the scorers inline.
    const g = store.create({ kind: 'genrm_score', model: 'judge' });
    store.addSamples(g.id, { samples: genrmSamples });
    store.seal(g.id);
    const t = store.create({ kind: 'teacher_logprobs', model: 'teacher' });
    store.addSamples(t.id, { samples: teacherSamples });
    store.seal(t.id);

    let committedAtBarrier: string[] = [];
    const barrier = coordinator.waitForPhase('train', 60_000).then((lease) => {
      committedAtBarrier = [store.get(g.id).state, store.get(t.id).state];
      return lease;
    });
    const result = await coordinator.transition({ operationId: 'step-1' });
    expect(result.path).toEqual(['genrm_score', 'teacher_score', 'train']);
    const lease = await barrier;
    expect(lease.phase).toBe('train');
    expect(committedAtBarrier).toEqual(['committed', 'committed']);
    // Everything the trainer needs is written back; every role sleeps with its memory released.
    expect(store.samples(g.id).map((s) => s.output)).toEqual(wantGenrm);
    expect(store.samples(t.id).map((s) => s.output)).toEqual(wantTeacher);
    expect(
      wantTeacher.every((o) => o.logprobs.every((x) => typeof x === 'number' && Number.isFinite(x))),
    ).toBe(true);
    expect(lease.lastRelease?.roles).toEqual(['teacher']);
    for (const r of ['rollout', 'genrm', 'teacher'] as const)
      expect(Object.values(state(r)).every((m) => m.state === 'sleeping')).toBe(true);
    expect(ms.rollout.registry.snapshot().phase).toBe('train');

    // The order of the RFC's defer transition, from the audit log.
    const seq = events
      .list({ subject: 'actor' })
      .filter((e) => e.kind === 'lease.released' || e.kind === 'lease.acquired')
      .map((e) => `${e.kind}:${(e.data.phase as string) ?? ''}`);
    expect(seq.slice(-6)).toEqual([
      'lease.released:rollout',
      'lease.acquired:genrm_score',
      'lease.released:genrm_score',
      'lease.acquired:teacher_score',
      'lease.released:teacher_score',
      'lease.acquired:train',
    ]);

    // A retried call with the same operation id returns the first result and runs nothing.
    expect(await coordinator.transition({ operationId: 'step-1' })).toEqual(result);
    // Trainer done: rollout wakes.
    await coordinator.releasePhase('train');
    expect(state('rollout').policy?.state).toBe('ready');
    expect(ms.rollout.registry.snapshot().phase).toBe('rollout');
  });

  it('a batch that fails validation fails whole, writes nothing back, and blocks the lease with the reason', async () => {
    const { coordinator, store } = await deferStack(boxedScore);
    const g = store.create({ kind: 'genrm_score', model: 'judge' });
    store.addSamples(g.id, { samples: genrmSamples });
    store.seal(g.id);
    const err = await coordinator.transition().catch((e: unknown) => e);
    expect(isUisError(err) && err.code).toBe('transition_failed');
    const b = store.get(g.id);
    expect(b.state).toBe('failed');
    expect(b.reason).toMatch(/no finite score/);
    expect(store.samples(g.id).every((s) => s.output === null)).toBe(true);
    const lease = coordinator.lease();
    expect(lease.status).toBe('blocked');
    expect(lease.reason).toMatch(/no finite score/);
  });

  it('startPhases: later phases start and release their memory one at a time, the first phase starts resident', async () => {
    const { ms, coordinator, events } = await deferStack(verdictScore, true);
    expect(coordinator.lease()).toMatchObject({ phase: 'rollout', status: 'held', holder: ['rollout'] });
    expect(ms.rollout.registry.snapshot().models.policy?.state).toBe('ready');
    expect(ms.genrm.registry.snapshot().models.judge?.state).toBe('sleeping');
    expect(ms.teacher.registry.snapshot().models.teacher?.state).toBe('sleeping');
    // From the audit log: each role's engines are asleep before the next role's engines come up.
    const order = events
      .list({ kind: 'replica.state' })
      .map((e) => `${e.subject.split('/')[0]}:${e.data.to as string}`)
      .filter((x) => x.endsWith(':ready') || x.endsWith(':sleeping'));
    const firstReady = (model: string) => order.indexOf(`${model}:ready`);
    const lastSleeping = (model: string) => order.lastIndexOf(`${model}:sleeping`);
    expect(lastSleeping('judge')).toBeLessThan(firstReady('teacher'));
    expect(lastSleeping('teacher')).toBeLessThan(firstReady('policy'));
    expect(order.filter((x) => x.startsWith('policy:'))).toEqual(['policy:ready', 'policy:ready']);
    // No batches queued: the scorer phases pass straight through to the trainer.
    expect((await coordinator.transition()).path).toEqual(['genrm_score', 'teacher_score', 'train']);
  });
});
