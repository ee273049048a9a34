import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ServedCounter, ServedHistogram } from './served-metrics.ts';

const BUCKETS = [0.005, 0.1, 1, 30];

/** The same observations through prom-client's metrics and through ours, each on a registry of its own. */
function both() {
  const ours = new Registry();
  const theirs = new Registry();
  const h = {
    ours: new ServedHistogram('t_seconds', 'help "quoted"\\', ours, BUCKETS),
    theirs: new Histogram({
      name: 't_seconds',
      help: 'help "quoted"\\',
      labelNames: ['role', 'model'],
      buckets: BUCKETS,
      registers: [theirs],
    }),
  };
  const c = {
    ours: new ServedCounter('n_total', 'requests', ours),
    theirs: new Counter({
      name: 'n_total',
      help: 'requests',
      labelNames: ['role', 'model', 'status'],
      registers: [theirs],
    }),
  };
  return { ours, theirs, h, c };
}

describe('served metrics (cached children)', () => {
  it('write /metrics exactly as prom-client does for the same observations', async () => {
    const { ours, theirs, h, c } = both();
    const samples: Array<[string, string, number]> = [
      ['rollout', 'policy', 0.004],
      ['rollout', 'policy', 0.1], // on a bound: that bucket, as prom-client
      ['rollout', 'a"b\\c', 45], // above every bound: +Inf only; a label value that needs escaping
      ['genrm', 'judge', 0.5],
    ];
    const ourChildren = new Map<string, ReturnType<ServedHistogram['labels']>>();
    for (const [role, model, v] of samples) {
      const key = `${role}/${model}`;
      if (!ourChildren.has(key)) ourChildren.set(key, h.ours.labels({ role, model }));
      ourChildren.get(key)!.observe(v);
      h.theirs.labels({ role, model }).observe(v);
      c.ours.labels({ role, model, status: '200' }).inc();
      c.theirs.labels({ role, model, status: '200' }).inc();
    }
    c.ours.labels({ role: 'rollout', model: 'policy', status: '503' }).inc(0); // counted at 0: shows, as theirs
    c.theirs.labels({ role: 'rollout', model: 'policy', status: '503' }).inc(0);
    h.ours.labels({ role: 'idle', model: 'never' }); // a child never observed: no lines, as prom-client
    c.ours.labels({ role: 'idle', model: 'never', status: '200' });
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('refuses what prom-client refuses: a non-number observation, a counter going down', () => {
    const { h, c } = both();
    expect(() => h.ours.labels({ role: 'r', model: 'm' }).observe(Number.NaN)).toThrow(TypeError);
    expect(() => c.ours.labels({ role: 'r', model: 'm', status: '200' }).inc(-1)).toThrow(/decrease/);
  });
});
