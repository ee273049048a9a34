import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { writeTakeTurnsConfig } from '../testing/chaos-configs.ts';
import {
  chaosScratch,
  listening,
  spawnUis,
  taggedPids,
  type UisProcess,
  within,
} from '../testing/uis-process.ts';

// Chaos: `uis` is killed (SIGKILL) at every step of a phase transition, with and without --adopt-engines, and
// restarted on the same database each time. Every restart must come back serving without any operator call: no
// resolve_lease, the lease held, the schedule going on. Recovery time = restart to the lease held in a consistent
// phase (the CLI prints its URLs only after the recovery), plus the first generate answered when that phase serves.
const { dir: tmp, tags } = chaosScratch('recovery');

const TOKEN = 'chaos-recovery-token';
const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/** Rollout (two engines) and GenRM take turns on 2 GPUs; each releases and resumes its memory in 0.6 s. */
function writeConfig(name: string, adopt: boolean): string {
  const slow = '{ sim_onload_ms: 600, sim_offload_ms: 600 }';
  return writeTakeTurnsConfig(tmp, name, { token: TOKEN, adopt, policyArgs: slow, judgeArgs: slow });
}

interface LeaseView {
  phase: string | null;
  status: string;
  reason: string | null;
  holder: string[];
  target: string | null;
}

async function lease(url: string): Promise<LeaseView> {
  const body = (await (await fetch(`${url}/admin/phases`, { headers: auth })).json()) as {
    result: { leases: LeaseView[] };
  };
  return body.result.leases[0] as LeaseView;
}

async function eventCount(url: string, kind: string): Promise<number> {
  const body = (await (
    await fetch(`${url}/admin/events?kind=${kind}&limit=1000`, { headers: auth })
  ).json()) as { result: { events: unknown[] } };
  return body.result.events.length;
}

/** The trainer's call that moves the schedule on (not an operator's repair). */
function advance(url: string): Promise<unknown> {
  return fetch(`${url}/admin/phases/advance`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ group: 'actor' }),
  }).catch(() => null);
}

async function generates(url: string): Promise<boolean> {
  const r = await fetch(`${url}/rollout/generate`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ text: 'after the crash', sampling_params: { max_new_tokens: 2 } }),
  }).catch(() => null);
  if (r === null) return false;
  await r.text();
  return r.status === 200;
}

/** The steps of the schedule's transitions where uis is killed: the phase the group must be held at first, and the
 * lease as it looks during the step. */
const STEPS = [
  {
    name: 'rollout releasing (rollout -> genrm_score)',
    from: 'rollout',
    during: (l: LeaseView) => l.target === 'genrm_score' && l.holder.includes('rollout'),
  },
  {
    name: 'genrm resuming (rollout -> genrm_score)',
    from: 'rollout',
    during: (l: LeaseView) => l.target === 'genrm_score' && l.holder.length === 0,
  },
  {
    name: 'genrm releasing (genrm_score -> train)',
    from: 'rollout',
    during: (l: LeaseView) => l.target === 'train' && l.holder.includes('genrm'),
  },
  {
    name: 'rollout resuming (train -> rollout)',
    from: 'train',
    during: (l: LeaseView) => l.target === 'rollout' && l.holder.length === 0,
  },
] as const;

const CRASHES_PER_MODE = 10;

interface Crash {
  mode: string;
  step: string;
  recoveredMs: number;
  phase: string | null;
}

function start(config: string): UisProcess {
  const uis = spawnUis(['serve', '--config', config, '--port', '0']);
  tags.push(uis.tag);
  return uis;
}

/** Brings the group to `phase` the way the trainer does (advancing), from a held lease. */
async function bringTo(url: string, phase: string): Promise<void> {
  for (let i = 0; i < 3; i++) {
    const l = await lease(url);
    if (l.status === 'held' && l.phase === phase) return;
    await advance(url);
    await waitFor(async () => (await lease(url)).status === 'held', 30_000, 'the advance to finish');
  }
  expect(await lease(url)).toMatchObject({ status: 'held', phase });
}

/** One mode's crashes, each at the next step of STEPS, chained: every restart is the next crash's process. */
async function crashes(mode: string, adopt: boolean): Promise<Crash[]> {
  const config = writeConfig(mode, adopt);
  const out: Crash[] = [];
  let uis = start(config);
  let url = await listening(uis);
  for (let i = 0; i < CRASHES_PER_MODE; i++) {
    const step = STEPS[i % STEPS.length] as (typeof STEPS)[number];
    await bringTo(url, step.from);
    const advancing = advance(url);
    await waitFor(
      async () => {
        const l = await lease(url);
        return l.status === 'transitioning' && step.during(l);
      },
      30_000,
      `${mode}: ${step.name}`,
    );
    process.kill(uis.child.pid as number, 'SIGKILL');
    await uis.exited;
    await advancing;
    const t0 = Date.now();
    uis = start(config);
    url = await listening(uis);
    const l = await lease(url);
    expect(l, `${mode} crash ${i + 1} at ${step.name}: ${uis.errors()}`).toMatchObject({
      status: 'held',
      reason: null,
    });
    if (l.phase === 'rollout') await waitFor(() => generates(url), 30_000, 'rollout serving again');
    out.push({ mode, step: step.name, recoveredMs: Date.now() - t0, phase: l.phase });
    // Serving back by the schedule alone: a lease left at train goes to rollout with the trainer's next advance.
    await bringTo(url, 'rollout');
    expect(await generates(url)).toBe(true);
  }
  // No operator call: nothing was resolved by hand; every crash's transition was recovered by the restart.
  expect(await eventCount(url, 'lease.resolved')).toBe(0);
  expect(await eventCount(url, 'lease.recovered')).toBe(CRASHES_PER_MODE);
  uis.child.kill('SIGTERM');
  await uis.exited;
  return out;
}

const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number;
};

describe('chaos: kill -9 at every step of a phase transition, restarted without an operator', {
  timeout: 600_000,
}, () => {
  it(`${2 * CRASHES_PER_MODE} crashes with and without adoption: each restart serves again by itself`, async () => {
    const all = (await Promise.all([crashes('adopt', true), crashes('fresh', false)])).flat();
    expect(all).toHaveLength(2 * CRASHES_PER_MODE);
    for (const mode of ['adopt', 'fresh']) {
      const ms = all.filter((c) => c.mode === mode).map((c) => c.recoveredMs);
      console.log(
        `chaos: ${mode}: ${ms.length} crashes, restart to serving median ${percentile(ms, 0.5)} ms, max ${Math.max(...ms)} ms`,
      );
    }
    for (const c of all) console.log(`  ${c.mode} ${c.step}: ${c.recoveredMs} ms, recovered at ${c.phase}`);
    await within(10_000, () => tags.every((t) => taggedPids(t).length === 0), 'every engine stopped');
  });
});
