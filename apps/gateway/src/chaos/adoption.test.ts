import { join } from 'node:path';
import { alive } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import {
  adminReplicas,
  type AdminReplica as Replica,
  writeAdoptingRolloutConfig,
} from '../testing/chaos-configs.ts';
import { chaosScratch, listening, spawnUis, taggedPids, within } from '../testing/uis-process.ts';

// Chaos: adoption mode. `uis` dies by kill -9 with its engines running; the restart on the same database adopts the
// engines that still answer as recorded and stops (only) a recorded engine it cannot identify.
const { dir: tmp, tags, stopped } = chaosScratch('adopt');

const TOKEN = 'chaos-adopt-token';
const config = writeAdoptingRolloutConfig(join(tmp, 'adopt.yaml'), {
  token: TOKEN,
  gpus: 3,
  db: join(tmp, 'uis.db'),
});

/** Requests the engine at `base` has received so far (the simulator's own counter). */
async function served(base: string): Promise<number> {
  const stats = (await (await fetch(`${base}/sim/stats`)).json()) as { requests: number };
  return stats.requests;
}

describe('chaos: adoption mode (gateway.adopt_engines)', { timeout: 180_000 }, () => {
  it('kill -9 of uis -> the restart adopts the same engine processes, starts none twice, stops a hung one', async () => {
    const first = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(first.tag);
    const url1 = await listening(first);
    const before = await adminReplicas(url1, TOKEN);
    expect(before).toHaveLength(3);
    expect(before.every((r) => r.state === 'ready' && r.pids.length === 1)).toBe(true);

    process.kill(first.child.pid as number, 'SIGKILL');
    await first.exited;
    // No watchdog in adoption mode: every engine outlives the control plane.
    const orphans = before.flatMap((r) => r.pids);
    expect(orphans.every(alive)).toBe(true);
    // One engine hangs (SIGSTOP: its process runs, it answers nothing): it cannot be identified over HTTP.
    const [hung, ...kept] = before as [Replica, ...Replica[]];
    process.kill(hung.pids[0] as number, 'SIGSTOP');
    stopped.push(hung.pids[0] as number);

    const second = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(second.tag);
    const url2 = await listening(second);
    const after = await adminReplicas(url2, TOKEN);
    const byId = new Map(after.map((r) => [r.engine_id, r]));
    // The answering engines were adopted: same processes, same URLs.
    for (const r of kept) expect(byId.get(r.engine_id)).toMatchObject({ pids: r.pids, base_url: r.base_url });
    // The hung one was stopped and its replica launched anew.
    await within(10_000, () => !alive(hung.pids[0] as number), 'hung engine stopped');
    const relaunched = byId.get(hung.engine_id);
    expect(relaunched?.pids).not.toEqual(hung.pids);
    expect(after.every((r) => r.state === 'ready')).toBe(true);
    // None started twice: the engine processes on this host are exactly the three replicas' (a process on its way
    // out, e.g. the hung engine being reaped, may still show for a moment).
    const expected = after.flatMap((r) => r.pids).sort();
    const engines = () =>
      [...taggedPids(first.tag), ...taggedPids(second.tag, [second.child.pid as number])].sort();
    await within(
      10_000,
      () => JSON.stringify(engines()) === JSON.stringify(expected),
      'one process per replica',
    );
    expect(engines()).toEqual(expected);

    // Serving works through the adopted engines.
    const counts = await Promise.all(kept.map((r) => served(r.base_url)));
    for (let i = 0; i < 12; i++) {
      const res = await fetch(`${url2}/rollout/generate`, {
        method: 'POST',
        body: JSON.stringify({ text: `hello ${i}`, sampling_params: { max_new_tokens: 2 } }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const later = await Promise.all(kept.map((r) => served(r.base_url)));
    expect(later.some((n, i) => n > (counts[i] as number))).toBe(true);
    const events = (await (
      await fetch(`${url2}/admin/events?kind=replica.adopted`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      })
    ).json()) as { result: { events: Array<{ subject: string }> } };
    expect(events.result.events.map((e) => e.subject).sort()).toEqual(kept.map((r) => r.engine_id).sort());

    // A clean stop stops every engine, the adopted ones included.
    second.child.kill('SIGTERM');
    await second.exited;
    const ms = await within(
      10_000,
      () => taggedPids(first.tag).length + taggedPids(second.tag).length === 0,
      'engines gone after a clean stop',
    );
    console.log(
      `chaos: adopted ${kept.length} engines after kill -9 (pids ${kept.flatMap((r) => r.pids).join(', ')}), stopped 1 hung; clean stop took every engine in ${ms} ms`,
    );
  });
});
