import type { SGLangEngine } from '@uis/sglang-engine';
import { ManualClock } from '@uis/sglang-engine/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { InferenceManager } from '../inference-manager.ts';
import { simRolloutManager } from '../testing.ts';

// The switch's order and barriers, recorded call by call on real sim engines. Each member's update lasts what the
// test says on the injected clock (its read-back waits that long), so the slowest-first order is exact, not timed.
const HOUR = 3_600_000;
const IDS = ['policy/0', 'policy/1', 'policy/2', 'policy/3'];

let manager: InferenceManager | undefined;
afterEach(async () => {
  await manager?.shutdown();
  manager = undefined;
});

/** A started manager of four sim replicas whose calls are recorded in `log`, in the order the switch makes them:
 * `pause <id>` and `continue <id>` as sent, `updated <id>` when its update is read back (after the delay `delays`
 * gives it for the next switch), `rollback <id>` as sent, and `published <version>` when the registry moves. */
async function recorded() {
  const clock = new ManualClock();
  const m = simRolloutManager(
    {
      name: 'policy',
      weight_source: 'disk',
      engine_groups: [{ num_gpus: 4, gpus_per_engine: 1 }],
    },
    { clock, options: { healthIntervalMs: HOUR } },
  );
  manager = m;
  await m.start();
  const log: string[] = [];
  const delays = new Map<string, number>();
  const failing = new Set<string>();
  for (const id of IDS) {
    const e = m.engine(id) as SGLangEngine;
    const pause = e.client.pauseGeneration.bind(e.client);
    vi.spyOn(e.client, 'pauseGeneration').mockImplementation((mode, opts) => {
      log.push(`pause ${id}`);
      return pause(mode, opts);
    });
    const resume = e.client.continueGeneration.bind(e.client);
    vi.spyOn(e.client, 'continueGeneration').mockImplementation((opts) => {
      log.push(`continue ${id}`);
      return resume(opts);
    });
    const load = e.loadWeights.bind(e);
    vi.spyOn(e, 'loadWeights').mockImplementation(async (req) => {
      if (failing.has(id)) throw new Error('injected: the engine refused the update');
      return load(req);
    });
    const readBack = e.readBackVersion.bind(e);
    vi.spyOn(e, 'readBackVersion').mockImplementation(async (expected) => {
      const v = await readBack(expected);
      const ms = delays.get(id);
      delays.delete(id);
      if (ms !== undefined) await clock.sleep(ms);
      log.push(`updated ${id}`);
      return v;
    });
    const update = e.updateWeights.bind(e);
    vi.spyOn(e, 'updateWeights').mockImplementation((req) => {
      log.push(`rollback ${id}`);
      return update(req);
    });
  }
  m.registry.subscribe((s) => {
    const v = s.models.policy?.weight_version;
    if (log.at(-1) !== `published ${v}`) log.push(`published ${v}`);
  });

  /** One pause_in_place switch to `version` whose members' updates take `ms` (by engine id) on the clock. */
  async function switchTo(
    version: string,
    ms: Record<string, number>,
    onFailure: 'quarantine' | 'rollback' = 'quarantine',
  ) {
    log.length = 0;
    for (const [id, d] of Object.entries(ms)) delays.set(id, d);
    const pending = clock.pending;
    const p = m.switchWeights('policy', {
      mode: 'pause_in_place',
      on_failure: onFailure,
      update: { source: 'disk', model_path: `/ckpt/${version}`, weight_version: version },
    });
    await clock.untilPending(pending + Object.keys(ms).length);
    await clock.advance(Math.max(...Object.values(ms)));
    return p;
  }
  const pauses = () => log.filter((l) => l.startsWith('pause ')).map((l) => l.slice('pause '.length));
  return { m, log, failing, switchTo, pauses };
}

describe('weight switch order', { timeout: 120_000 }, () => {
  it('pauses and updates the members slowest first, by each one’s fastest update in its last three switches', async () => {
    const { switchTo, pauses } = await recorded();
    // Never timed: the members' own order.
    const first = await switchTo('v1', {
      'policy/0': 100,
      'policy/1': 400,
      'policy/2': 200,
      'policy/3': 300,
    });
    expect(pauses()).toEqual(IDS);
    expect(first.engines.map((e) => [e.engine_id, e.update_ms])).toEqual([
      ['policy/0', 100],
      ['policy/1', 400],
      ['policy/2', 200],
      ['policy/3', 300],
    ]);
    // The member found slowest starts first.
    await switchTo('v2', { 'policy/0': 500, 'policy/1': 150, 'policy/2': 250, 'policy/3': 50 });
    expect(pauses()).toEqual(['policy/1', 'policy/3', 'policy/2', 'policy/0']);
    // One slow switch (policy/0 at 500) does not make it the slowest: its fastest recent update (100) counts.
    await switchTo('v3', { 'policy/0': 400, 'policy/1': 400, 'policy/2': 400, 'policy/3': 400 });
    expect(pauses()).toEqual(['policy/2', 'policy/1', 'policy/0', 'policy/3']);
    await switchTo('v4', { 'policy/0': 400, 'policy/1': 400, 'policy/2': 400, 'policy/3': 400 });
    expect(pauses()).toEqual(['policy/2', 'policy/1', 'policy/0', 'policy/3']);
    // Three switches later v1's times are forgotten: policy/0 has been slow in each of v2-v4.
    await switchTo('v5', { 'policy/0': 100, 'policy/1': 100, 'policy/2': 100, 'policy/3': 100 });
    expect(pauses()).toEqual(['policy/0', 'policy/2', 'policy/1', 'policy/3']);
  });

  it('publishes the new topology once every member is updated, then continues them', async () => {
    const { m, log, switchTo } = await recorded();
    const rec = await switchTo('v1', { 'policy/0': 100, 'policy/1': 400, 'policy/2': 200, 'policy/3': 300 });
    expect(rec.outcome).toBe('switched');
    const published = log.indexOf('published v1');
    const updated = log.flatMap((l, i) => (l.startsWith('updated ') ? [i] : []));
    const continued = log.flatMap((l, i) => (l.startsWith('continue ') ? [i] : []));
    expect(updated).toHaveLength(4);
    expect(continued).toHaveLength(4);
    expect(Math.max(...updated)).toBeLessThan(published);
    expect(published).toBeLessThan(Math.min(...continued));
    expect(rec.phases_ms.published).toBeLessThanOrEqual(rec.phases_ms.continued);
    expect(m.registry.snapshot().models.policy?.engines.map((e) => e.weight_version)).toEqual(
      IDS.map(() => 'v1'),
    );
  });

  it('on_failure rollback: the others go back before anything is published or continued', async () => {
    const { m, log, failing, switchTo } = await recorded();
    failing.add('policy/2');
    const rec = await switchTo('v1', { 'policy/0': 100, 'policy/1': 400, 'policy/3': 300 }, 'rollback');
    expect(rec).toMatchObject({ outcome: 'rolled_back', quarantined: ['policy/2'] });
    const rollbacks = log.flatMap((l, i) => (l.startsWith('rollback ') ? [i] : []));
    const continued = log.flatMap((l, i) => (l.startsWith('continue ') ? [i] : []));
    const published = log.findIndex((l) => l.startsWith('published '));
    expect(rollbacks).toHaveLength(3);
    // Paused members only are continued: the failed one was paused too.
    expect(continued).toHaveLength(4);
    expect(Math.max(...rollbacks)).toBeLessThan(published);
    expect(published).toBeLessThan(Math.min(...continued));
    const from = rec.from_version;
    expect(m.registry.snapshot().models.policy?.weight_version).toBe(from);
    expect(
      m.registry.snapshot().models.policy?.engines.map((e) => [e.weight_version, e.quarantined]),
    ).toEqual([
      [from, undefined],
      [from, undefined],
      [from, true],
      [from, undefined],
    ]);
  });
});
