import type { DiscoveryModel } from '@uis/spec';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Registry } from './registry.ts';

const model = (state: 'ready' | 'draining', eligible: boolean): Record<string, DiscoveryModel> => ({
  m: {
    state,
    router_url: null,
    weight_version: 'v1',
    engines: [
      {
        engine_id: 'm/0',
        base_url: 'http://127.0.0.1:1',
        state,
        direct_eligible: eligible,
        weight_version: 'v1',
      },
    ],
  },
});

describe('Registry', () => {
  it('moves the revision only when content changes and notifies subscribers', () => {
    const r = new Registry({
      role: 'teacher',
      routing: {
        route_keys: {},
        aliases: {},
        policy: 'round_robin',
        model_policies: {},
        affinity_header: 'x',
      },
    });
    const seen: number[] = [];
    const off = r.subscribe((s) => seen.push(s.topology_revision));
    expect(r.publish({ models: model('ready', true) }).changed).toBe(true);
    expect(r.publish({ models: model('ready', true) }).changed).toBe(false);
    expect(r.publish({ models: model('draining', false) }).changed).toBe(true);
    off();
    r.publish({ phase: 'train' });
    expect(seen).toEqual([1, 2]);
    const s = r.snapshot();
    expect(s.topology_revision).toBe(3);
    expect(s.schema_version).toBe(2);
    expect(s.registry_epoch).toBe(r.epoch);
    expect(s.manager_epoch).toBe(r.epoch);
    // No default configured: the only model is the default the resolver uses, named for Relax's readers.
    expect(s.routing?.default_model).toBe('m');
    expect(s.routing?.route_key_to_model).toEqual({ m: 'm' });
    expect(Object.isFrozen(s.models)).toBe(true);
  });

  it('refuses an invalid snapshot and keeps the old one', () => {
    const r = new Registry({ role: 'rollout' });
    expect(() => r.publish({ models: model('draining', true) })).toThrow();
    expect(r.revision).toBe(0);
  });

  it('a new registry is a new epoch', () => {
    expect(new Registry({ role: 'rollout' }).epoch).not.toBe(new Registry({ role: 'rollout' }).epoch);
  });

  it('waitForRevision resolves on publication, or with the current snapshot on timeout / abort', async () => {
    const r = new Registry({ role: 'genrm' });
    const waiting = r.waitForRevision(1, 10_000);
    r.publish({ models: model('ready', true) });
    expect((await waiting).topology_revision).toBe(1);
    expect((await r.waitForRevision(5, 20)).topology_revision).toBe(1);
    const ac = new AbortController();
    const p = r.waitForRevision(5, 10_000, ac.signal);
    ac.abort();
    expect((await p).topology_revision).toBe(1);
  });
});

describe('Registry (property)', () => {
  it('the revision moves by one exactly when the published content differs from the current one', () => {
    const drafts = [
      { models: model('ready', true) },
      { models: model('draining', false) },
      { phase: 'rollout' },
      { phase: 'train' },
      { models: {} },
    ];
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: drafts.length - 1 }), { maxLength: 40 }), (picks) => {
        const r = new Registry({ role: 'rollout' });
        let last = JSON.stringify({ phase: r.snapshot().phase, models: r.snapshot().models });
        for (const i of picks) {
          const before = r.revision;
          const { changed, snapshot } = r.publish(drafts[i] as (typeof drafts)[number]);
          const now = JSON.stringify({ phase: snapshot.phase, models: snapshot.models });
          expect(changed).toBe(now !== last);
          expect(r.revision).toBe(before + (changed ? 1 : 0));
          last = now;
        }
      }),
    );
  });
});
