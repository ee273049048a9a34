import { type DiscoveryEngine, type DiscoveryModel, type ReplicaPolicy, UisError } from '@uis/spec';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ReplicaSelector, type Selection } from './replica-selector.ts';
import { type ResolvedModel, resolveModel } from './resolve-model.ts';
import { engine, modelEntry, snapshot } from './testing.ts';

function resolved(entry: DiscoveryModel, policy: ReplicaPolicy = 'round_robin', epoch = 'e1'): ResolvedModel {
  const snap = snapshot({ models: { m: entry }, registry_epoch: epoch });
  snap.routing = { default_model: 'm', route_keys: {}, aliases: {}, policy, model_policies: {} };
  const r = resolveModel(snap, {});
  if (r instanceof UisError) throw r;
  return r;
}

function sel(result: Selection | UisError): Selection {
  if (result instanceof UisError) throw new Error(`${result.code}: ${result.message}`);
  return result;
}

function ids(selector: ReplicaSelector, model: ResolvedModel, n: number): string[] {
  return Array.from({ length: n }, () => sel(selector.select(model)).engineId!);
}

describe('ReplicaSelector: candidates', () => {
  it('skips replicas that are not ready, not direct_eligible, without URL, or PD workers', () => {
    const entry = modelEntry('m', 0, {
      engines: [
        engine('m', 0, { state: 'draining', direct_eligible: false }),
        engine('m', 1, { direct_eligible: false }),
        engine('m', 2, { base_url: null, direct_eligible: false }),
        engine('m', 3),
        engine('m', 4, { worker_type: 'prefill' }),
        engine('m', 5, { state: 'dead', direct_eligible: false }),
        engine('m', 6),
      ],
    });
    for (const policy of ['round_robin', 'least_outstanding', 'affinity', 'cache_aware'] as const) {
      const selector = new ReplicaSelector();
      const model = resolved(entry, policy);
      const seen = new Set(
        Array.from(
          { length: 20 },
          (_, i) => sel(selector.select(model, { sessionKey: `k${i}`, prompt: `p${i}` })).engineId,
        ),
      );
      expect(seen.size, policy).toBeGreaterThan(0);
      for (const id of seen) expect(['m/3', 'm/6'], policy).toContain(id);
    }
  });

  it('no eligible replica is a 503 naming the replica states', () => {
    const entry = modelEntry('m', 0, { engines: [engine('m', 0, { direct_eligible: false })] });
    const e = new ReplicaSelector().select(resolved(entry));
    expect(e).toBeInstanceOf(UisError);
    expect(e).toMatchObject({ code: 'no_eligible_replica', status: 503 });
    expect((e as UisError).message).toContain('m/0=ready (not direct_eligible)');
  });

  it('router mode returns the router URL', () => {
    const entry = modelEntry('m', 2, { router_url: 'http://router:30000' });
    const s = sel(new ReplicaSelector().select(resolved(entry)));
    expect(s).toMatchObject({
      url: 'http://router:30000',
      viaRouter: true,
      engineId: null,
      reason: 'router',
    });
  });

  it('router mode checks the min weight version against the ready workers it lists', () => {
    const entry = modelEntry('m', 0, {
      router_url: 'http://router:30000',
      engines: [engine('m', 0, { direct_eligible: false, weight_version: '4' })],
    });
    expect(sel(new ReplicaSelector().select(resolved(entry), { minWeightVersion: '4' })).viaRouter).toBe(
      true,
    );
    expect(new ReplicaSelector().select(resolved(entry), { minWeightVersion: '5' })).toMatchObject({
      code: 'no_replica_at_version',
      status: 503,
    });
  });

  it('excluded replicas are not picked', () => {
    const selector = new ReplicaSelector();
    const model = resolved(modelEntry('m', 3));
    for (let i = 0; i < 6; i++) {
      expect(sel(selector.select(model, { exclude: new Set(['m/1']) })).engineId).not.toBe('m/1');
    }
    const e = selector.select(model, { exclude: new Set(['m/0', 'm/1', 'm/2']) });
    expect(e).toMatchObject({ code: 'no_eligible_replica', status: 503 });
  });
});

describe('ReplicaSelector: min weight version', () => {
  const entry = modelEntry('m', 0, {
    engines: [
      engine('m', 0, { weight_version: '9' }),
      engine('m', 1, { weight_version: '10' }),
      engine('m', 2, { weight_version: '11' }),
      engine('m', 3),
    ],
  });
  const cases: Array<[string, string[]]> = [
    ['9', ['m/0', 'm/1', 'm/2']],
    ['10', ['m/1', 'm/2']],
    ['11', ['m/2']],
  ];
  for (const [min, expected] of cases) {
    it(`>= ${min} (numeric comparison) picks only ${expected.join(', ')}`, () => {
      const selector = new ReplicaSelector();
      const model = resolved(entry);
      const seen = new Set(
        Array.from({ length: 12 }, () => sel(selector.select(model, { minWeightVersion: min })).engineId),
      );
      expect([...seen].sort()).toEqual(expected);
    });
  }
  it('none at the version is a 503 listing the versions served', () => {
    const e = new ReplicaSelector().select(resolved(entry), { minWeightVersion: '12' });
    expect(e).toMatchObject({ code: 'no_replica_at_version', status: 503 });
    expect((e as UisError).message).toContain('9, 10, 11, (none)');
  });
});

describe('ReplicaSelector: round robin', () => {
  it('cycles through eligible replicas in discovery order', () => {
    const selector = new ReplicaSelector();
    expect(ids(selector, resolved(modelEntry('m', 3)), 7)).toEqual([
      'm/0',
      'm/1',
      'm/2',
      'm/0',
      'm/1',
      'm/2',
      'm/0',
    ]);
  });

  it('resets its counter when the registry epoch changes, not when the revision moves', () => {
    const selector = new ReplicaSelector();
    expect(ids(selector, resolved(modelEntry('m', 3), 'round_robin', 'e1'), 2)).toEqual(['m/0', 'm/1']);
    // Same epoch, new snapshot object (new revision): the cursor continues.
    expect(ids(selector, resolved(modelEntry('m', 3), 'round_robin', 'e1'), 1)).toEqual(['m/2']);
    // New epoch: the manager restarted; start over.
    expect(ids(selector, resolved(modelEntry('m', 3), 'round_robin', 'e2'), 2)).toEqual(['m/0', 'm/1']);
  });
});

describe('ReplicaSelector: least outstanding', () => {
  it('picks the fewest in-flight, ties by round robin', () => {
    const selector = new ReplicaSelector();
    const model = resolved(modelEntry('m', 3), 'least_outstanding');
    selector.acquire('m/0');
    selector.acquire('m/0');
    selector.acquire('m/1');
    expect(sel(selector.select(model)).engineId).toBe('m/2');
    selector.acquire('m/2');
    selector.acquire('m/2');
    expect(sel(selector.select(model)).engineId).toBe('m/1');
    selector.release('m/0');
    selector.release('m/0');
    expect(sel(selector.select(model)).engineId).toBe('m/0');
  });

  it('ties rotate', () => {
    const selector = new ReplicaSelector();
    expect(ids(selector, resolved(modelEntry('m', 3), 'least_outstanding'), 4)).toEqual([
      'm/0',
      'm/1',
      'm/2',
      'm/0',
    ]);
  });

  it('uses an injected in-flight function', () => {
    const load: Record<string, number> = { 'm/0': 5, 'm/1': 0, 'm/2': 3 };
    const selector = new ReplicaSelector({ inFlight: (id) => load[id] ?? 0 });
    expect(ids(selector, resolved(modelEntry('m', 3), 'least_outstanding'), 3)).toEqual([
      'm/1',
      'm/1',
      'm/1',
    ]);
  });

  it('property: never picks a replica with more in-flight than another eligible one', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ eligible: fc.boolean(), load: fc.nat(20) }), { minLength: 1, maxLength: 24 }),
        fc.nat(50),
        (specs, warmup) => {
          const engines: DiscoveryEngine[] = specs.map((s, i) =>
            engine('m', i, s.eligible ? {} : { direct_eligible: false, state: 'draining' }),
          );
          const model = resolved(modelEntry('m', 0, { engines }), 'least_outstanding');
          const loads = new Map(specs.map((s, i) => [`m/${i}`, s.load]));
          const selector = new ReplicaSelector({ inFlight: (id) => loads.get(id)! });
          for (let i = 0; i < warmup; i++) selector.select(model);
          const result = selector.select(model);
          const eligible = specs.map((s, i) => ({ ...s, id: `m/${i}` })).filter((s) => s.eligible);
          if (eligible.length === 0) return result instanceof UisError;
          const picked = sel(result).engineId!;
          const min = Math.min(...eligible.map((s) => s.load));
          return eligible.some((s) => s.id === picked) && loads.get(picked) === min;
        },
      ),
    );
  });
});

describe('ReplicaSelector: any policy', () => {
  it('property: never returns an ineligible or excluded replica, nor one below the min version', () => {
    const engineArb = fc.record({
      state: fc.constantFrom('starting', 'ready', 'draining', 'sleeping', 'onloading', 'dead' as const),
      eligible: fc.boolean(),
      url: fc.boolean(),
      version: fc.option(fc.constantFrom('1', '2', '3', '10'), { nil: undefined }),
    });
    fc.assert(
      fc.property(
        fc.array(engineArb, { minLength: 0, maxLength: 16 }),
        fc.constantFrom<ReplicaPolicy>('round_robin', 'least_outstanding', 'affinity', 'cache_aware'),
        fc.array(
          fc.record({
            key: fc.string(),
            prompt: fc.string(),
            min: fc.option(fc.constantFrom('1', '2', '3'), { nil: undefined }),
            exclude: fc.nat(16),
          }),
          { minLength: 1, maxLength: 10 },
        ),
        (specs, policy, requests) => {
          const engines: DiscoveryEngine[] = specs.map((s, i) => {
            const eligible = s.eligible && s.state === 'ready' && s.url;
            return engine('m', i, {
              state: s.state,
              direct_eligible: eligible,
              base_url: s.url ? `http://h${i}:1` : null,
              weight_version: s.version,
            });
          });
          const model = resolved(modelEntry('m', 0, { engines }), policy);
          const selector = new ReplicaSelector({ cacheAware: { balance_abs_threshold: 1 } });
          for (const r of requests) {
            const exclude = new Set([`m/${r.exclude}`]);
            const result = selector.select(model, {
              sessionKey: r.key,
              prompt: r.prompt,
              minWeightVersion: r.min,
              exclude,
            });
            if (result instanceof UisError) {
              if (result.status !== 503) return false;
              continue;
            }
            const idx = Number(result.engineId!.split('/')[1]);
            const e = engines[idx]!;
            if (!(e.state === 'ready' && e.direct_eligible && e.base_url === result.url)) return false;
            if (exclude.has(result.engineId!)) return false;
            if (
              r.min !== undefined &&
              (e.weight_version === undefined || Number(e.weight_version) < Number(r.min))
            )
              return false;
            selector.acquire(result.engineId!);
          }
          return true;
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('ReplicaSelector: affinity (rendezvous)', () => {
  it('a key sticks to one replica; different keys spread', () => {
    const selector = new ReplicaSelector();
    const model = resolved(modelEntry('m', 8), 'affinity');
    const first = sel(selector.select(model, { affinityKey: 'session-42' })).engineId;
    for (let i = 0; i < 10; i++)
      expect(sel(selector.select(model, { affinityKey: 'session-42' })).engineId).toBe(first);
    const spread = new Set(
      Array.from({ length: 200 }, (_, i) => sel(selector.select(model, { affinityKey: `s${i}` })).engineId),
    );
    expect(spread.size).toBe(8);
  });

  it('without a key it falls back to round robin', () => {
    const selector = new ReplicaSelector();
    const model = resolved(modelEntry('m', 3), 'affinity');
    expect(Array.from({ length: 3 }, () => sel(selector.select(model)).reason)).toEqual([
      'round_robin',
      'round_robin',
      'round_robin',
    ]);
    expect(ids(selector, model, 3)).toEqual(['m/0', 'm/1', 'm/2']);
  });

  it('property: adding a replica moves only ~1/(N+1) of 1.5k keys, and only to the new replica', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 32 }), fc.string({ minLength: 1, maxLength: 8 }), (n, salt) => {
        const before = resolved(modelEntry('m', n), 'affinity');
        const after = resolved(modelEntry('m', n + 1), 'affinity');
        const selector = new ReplicaSelector();
        let moved = 0;
        // One SHA-256 per replica and key (Relax's rule): 1.5k keys keep the run short, 6 sd still catches a mod-N hash.
        const keys = 1_500;
        for (let k = 0; k < keys; k++) {
          const key = `${salt}-${k}`;
          const a = sel(selector.select(before, { affinityKey: key })).engineId;
          const b = sel(selector.select(after, { affinityKey: key })).engineId;
          if (a !== b) {
            moved++;
            if (b !== `m/${n}`) return false;
          }
        }
        const expected = keys / (n + 1);
        // Binomial(1.5k, 1/(n+1)): 6 standard deviations of slack keeps this deterministic-in-practice.
        const sd = Math.sqrt(keys * (1 / (n + 1)) * (1 - 1 / (n + 1)));
        return Math.abs(moved - expected) <= 6 * sd + 1;
      }),
      { numRuns: 6 },
    );
  });

  it('removing a replica moves only its own keys', () => {
    const selector = new ReplicaSelector();
    const full = resolved(modelEntry('m', 10), 'affinity');
    const entry = modelEntry('m', 10);
    entry.engines[4] = engine('m', 4, { state: 'draining', direct_eligible: false });
    const less = resolved(entry, 'affinity');
    for (let k = 0; k < 5000; k++) {
      const a = sel(selector.select(full, { affinityKey: `k${k}` })).engineId;
      const b = sel(selector.select(less, { affinityKey: `k${k}` })).engineId;
      if (a !== 'm/4') expect(b).toBe(a);
    }
  });
});

describe('ReplicaSelector: cache aware', () => {
  const prefix = 'You are a careful math tutor. Solve the problem step by step and box the answer. ';

  it('routes a shared prefix back to the replica that saw it', () => {
    const selector = new ReplicaSelector();
    const model = resolved(modelEntry('m', 4), 'cache_aware');
    const first = sel(selector.select(model, { prompt: `${prefix}Problem 1` }));
    expect(first.reason).toBe('cache_smallest');
    for (let i = 2; i < 10; i++) {
      const s = sel(selector.select(model, { prompt: `${prefix}Problem ${i}` }));
      expect(s.engineId).toBe(first.engineId);
      expect(s.reason).toBe('cache_match');
    }
  });

  it('unrelated prompts go to the replica with the smallest tree', () => {
    const selector = new ReplicaSelector();
    const model = resolved(modelEntry('m', 3), 'cache_aware');
    const picks = ['aaaa', 'bbbbbbbb', 'cccccccccccc'].map(
      (p) => sel(selector.select(model, { prompt: p })).engineId,
    );
    expect(new Set(picks).size).toBe(3);
    // m/0 holds 4 chars, the smallest: a new unrelated prompt goes there.
    expect(sel(selector.select(model, { prompt: 'zzzz' })).engineId).toBe(picks[0]);
  });

  it('a match below cache_threshold does not count', () => {
    const selector = new ReplicaSelector({ cacheAware: { cache_threshold: 0.5 } });
    const model = resolved(modelEntry('m', 2), 'cache_aware');
    const a = sel(selector.select(model, { prompt: 'abcdefghij' })).engineId;
    const b = sel(selector.select(model, { prompt: 'abcd0123456789' }));
    expect(b.reason).toBe('cache_smallest');
    expect(b.engineId).not.toBe(a);
  });

  it('shortest queue when load is imbalanced past both thresholds', () => {
    const load: Record<string, number> = { 'm/0': 100, 'm/1': 10 };
    const selector = new ReplicaSelector({ inFlight: (id) => load[id] ?? 0 });
    const model = resolved(modelEntry('m', 2), 'cache_aware');
    // abs 90 > 64 and 100 > 1.5 * 10: balance.
    const s = sel(selector.select(model, { prompt: prefix }));
    expect(s).toMatchObject({ engineId: 'm/1', reason: 'cache_balance' });
    // Now m/1 holds the prefix; 80 vs 30 is past the relative threshold but not the absolute one: cache wins.
    load['m/1'] = 80;
    load['m/0'] = 30;
    expect(sel(selector.select(model, { prompt: `${prefix}more` }))).toMatchObject({
      engineId: 'm/1',
      reason: 'cache_match',
    });
  });

  it('forgets replicas that leave the topology', () => {
    const selector = new ReplicaSelector();
    const model = resolved(modelEntry('m', 2), 'cache_aware');
    const a = sel(selector.select(model, { prompt: prefix })).engineId!;
    const entry = modelEntry('m', 2);
    const idx = Number(a.split('/')[1]);
    entry.engines[idx] = engine('m', idx, { state: 'dead', direct_eligible: false });
    const next = sel(selector.select(resolved(entry, 'cache_aware'), { prompt: prefix }));
    expect(next.engineId).not.toBe(a);
    expect(selector.treeOf('m')!.tenants()).not.toContain(a);
  });
});
