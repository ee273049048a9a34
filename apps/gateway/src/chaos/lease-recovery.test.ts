import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { adminReplicas, writeTakeTurnsConfig } from '../testing/chaos-configs.ts';
import { chaosScratch, listening, spawnUis, taggedPids, within } from '../testing/uis-process.ts';

// Chaos: `uis` dies by kill -9 in the middle of a phase transition (the scorer's onload, 6 s here). The restart on
// the same database resumes the transition by itself: every engine's GPU memory is known (an adopted engine whose
// memory call was in flight is relaunched, since SGLang cannot report its memory).
const { dir: tmp, tags } = chaosScratch('lease');

const TOKEN = 'chaos-lease-token';
const auth = { authorization: `Bearer ${TOKEN}` };

/** Rollout and GenRM take turns on 2 GPUs; by default the GenRM engine takes 6 s to resume its memory. */
function writeConfig(name: string, adopt: boolean, judgeArgs = '{ sim_onload_ms: 6000 }'): string {
  return writeTakeTurnsConfig(tmp, name, { token: TOKEN, adopt, judgeArgs });
}

async function enginePids(url: string): Promise<Record<string, number[]>> {
  return Object.fromEntries((await adminReplicas(url, TOKEN)).map((r) => [r.engine_id, r.pids]));
}

interface LeaseView {
  group: string;
  phase: string | null;
  status: string;
  reason: string | null;
  holder: string[];
}

async function lease(url: string): Promise<LeaseView> {
  const body = (await (await fetch(`${url}/admin/phases`, { headers: auth })).json()) as {
    result: { leases: LeaseView[] };
  };
  return body.result.leases[0] as LeaseView;
}

async function eventKinds(url: string): Promise<string[]> {
  const body = (await (await fetch(`${url}/admin/events?limit=1000`, { headers: auth })).json()) as {
    result: { events: Array<{ kind: string }> };
  };
  return body.result.events.map((e) => e.kind);
}

/** Starts `uis serve`, asks for the next phase and kills the process (SIGKILL) while GenRM onloads. */
async function crashDuringOnload(config: string): Promise<void> {
  const uis = spawnUis(['serve', '--config', config, '--port', '0']);
  tags.push(uis.tag);
  const url = await listening(uis);
  expect(await lease(url)).toMatchObject({ status: 'held', phase: 'rollout' });
  const advance = fetch(`${url}/admin/phases/advance`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ group: 'actor' }),
  }).catch(() => null);
  // Rollout released its memory (nobody holds the GPUs) and GenRM's 6 s resume runs.
  let seen: LeaseView | null = null;
  await waitFor(
    async () => {
      seen = await lease(url);
      return seen.status === 'transitioning' && seen.holder.length === 0;
    },
    20_000,
    'the transition onloading genrm',
  );
  process.kill(uis.child.pid as number, 'SIGKILL');
  await uis.exited;
  await advance;
}

async function stop(uis: ReturnType<typeof spawnUis>): Promise<void> {
  uis.child.kill('SIGTERM');
  await uis.exited;
  await within(10_000, () => tags.every((t) => taggedPids(t).length === 0), 'every engine stopped');
}

describe('chaos: kill -9 of uis in the middle of a phase transition', { timeout: 180_000 }, () => {
  it('the restart resumes the transition without an operator when every engine memory state is known', async () => {
    const config = writeConfig('resume', false);
    await crashDuringOnload(config);
    // The engines died with uis (watchdogs); the restart verified them gone and started a new set, each resident:
    // every engine's memory is known, so the transition to genrm_score runs again and goes on to train.
    const t0 = Date.now();
    const uis = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(uis.tag);
    const url = await listening(uis);
    expect(await lease(url)).toMatchObject({ status: 'held', phase: 'train', reason: null });
    const kinds = await eventKinds(url);
    expect(kinds).toContain('lease.recovered');
    expect(kinds).not.toContain('lease.resolved');
    console.log(
      `chaos: lease resumed by itself after kill -9 mid-transition; restart to serving ${Date.now() - t0} ms`,
    );
    await stop(uis);
  });

  it('with adoption, an engine whose memory resume was in flight is relaunched and the lease resumes by itself', async () => {
    const config = writeConfig('doubt', true);
    await crashDuringOnload(config);
    const uis = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(uis.tag);
    const url = await listening(uis);
    // SGLang cannot report what the GenRM engine holds (and a second resume would kill it): it was stopped and
    // launched again, fully resident; the rollout engines' release was acknowledged, so they were adopted asleep.
    expect(await lease(url)).toMatchObject({ status: 'held', phase: 'train', reason: null });
    const kinds = await eventKinds(url);
    expect(kinds).toContain('lease.recovered');
    expect(kinds).not.toContain('lease.resolved');
    expect(kinds.filter((k) => k === 'replica.adopted')).toHaveLength(2);
    expect(kinds).toContain('replica.not_adopted');
    await stop(uis);
  });

  it('with adoption, a crash while the scorer phase works resumes by itself on the adopted engines', async () => {
    // Every memory call was acknowledged before the crash (rollout released, GenRM resident and scoring): the
    // restart adopts all three engines and runs the transition again to its target, where the batch is committed.
    const config = writeConfig('adopted', true, '{ sim_decode_us_per_token: 150000 }');
    const uis = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(uis.tag);
    const url = await listening(uis);
    const batch = (await (
      await fetch(`${url}/admin/batches`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          kind: 'genrm_score',
          samples: [0, 1].map((i) => ({
            sample_id: `s${i}`,
            input: { messages: [{ role: 'user', content: `Judge answer ${i}. Judgement:` }] },
          })),
        }),
      })
    ).json()) as { result: { id: string } };
    const pids = await enginePids(url);
    const advance = fetch(`${url}/admin/phases/advance`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ group: 'actor' }),
    }).catch(() => null);
    // GenRM holds the GPUs and scores the batch (the phase work runs while the lease is still transitioning).
    await waitFor(
      async () => {
        const l = await lease(url);
        return l.status === 'transitioning' && l.phase === 'genrm_score' && l.holder.includes('genrm');
      },
      20_000,
      'genrm scoring the batch',
    );
    process.kill(uis.child.pid as number, 'SIGKILL');
    await uis.exited;
    await advance;

    const again = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(again.tag);
    const url2 = await listening(again);
    expect(await lease(url2)).toMatchObject({ status: 'held', phase: 'train', reason: null });
    expect(await enginePids(url2)).toEqual(pids);
    const kinds = await eventKinds(url2);
    expect(kinds).toContain('lease.recovered');
    expect(kinds.filter((k) => k === 'replica.adopted')).toHaveLength(3);
    const got = (await (
      await fetch(`${url2}/admin/batches/${batch.result.id}`, { headers: auth })
    ).json()) as { result: { batch: { state: string }; samples: Array<{ output: { score: number } }> } };
    expect(got.result.batch.state).toBe('committed');
    for (const s of got.result.samples) expect([0, 1]).toContain(s.output.score);
    await stop(again);
  });
});
