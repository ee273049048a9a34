import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { type DiscoverySnapshot, type ReplicaPolicy, UisError } from '@uis/spec';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { affinityMessage, asciiBytes, pythonJsonString } from './affinity-hash.ts';
import { ReplicaSelector } from './replica-selector.ts';
import { requestKeys } from './request-keys.ts';
import { route } from './route.ts';
import { sha256Hex } from './sha256.ts';
import { engine, modelEntry, snapshot } from './testing.ts';

/** Relax's affinity rule checked against Python itself: the reference below is Relax's resolver rule written in
 * Python (json.dumps with compact separators, ensure_ascii, hashlib.sha256, max over the digests' bytes), run by
 * python3 in the test on the same inputs. */
const PYTHON_REFERENCE = `
import hashlib, json, sys
def pick(role, model_id, key, engine_ids):
    digest = lambda e: hashlib.sha256(json.dumps([role, model_id, key, e], separators=(",", ":")).encode()).digest()
    return max(engine_ids, key=digest)
cases = json.load(sys.stdin)
json.dump({
    "picks": [pick(c["role"], c["model"], c["key"], c["engines"]) for c in cases["picks"]],
    "dumps": [json.dumps(s) for s in cases["dumps"]],
}, sys.stdout)
`;

interface PickCase {
  role: string;
  model: string;
  key: string;
  engines: string[];
}

function python(picks: PickCase[], dumps: string[]): { picks: string[]; dumps: string[] } {
  const out = execFileSync('python3', ['-c', PYTHON_REFERENCE], {
    input: JSON.stringify({ picks, dumps }),
    encoding: 'utf8',
  });
  return JSON.parse(out) as { picks: string[]; dumps: string[] };
}

const KEYS = [
  'conversation-17',
  'group/42#sample-3',
  'a',
  '',
  '会话-甲',
  'naïve café',
  'emoji 😀 key',
  'quote " and \\ backslash',
  'tab\tnewline\ncontrol\u0001 del\u007f',
  'x'.repeat(150),
  'ключ-сессии',
  '\u00a0nbsp\u2028line-sep',
];

function snap(role: string, model: string, ids: string[], policy: ReplicaPolicy): DiscoverySnapshot {
  return snapshot({
    role: role as DiscoverySnapshot['role'],
    models: {
      [model]: modelEntry(model, 0, {
        engines: ids.map((id, i) => engine(model, i, { engine_id: id })),
      }),
    },
    routing: { default_model: model, route_keys: {}, aliases: {}, policy, model_policies: {} },
  });
}

function decide(s: DiscoverySnapshot, selector: ReplicaSelector, key: string): string | null {
  const r = route(s, requestKeys({}, { 'X-SMG-Routing-Key': key }), selector);
  if (r instanceof UisError) throw r;
  expect(r.selection.reason).toBe('affinity');
  return r.selection.engineId;
}

describe('Relax affinity rule (SHA-256 rendezvous over Python json.dumps)', () => {
  it('hashes like node:crypto for any length (block boundaries included)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        expect(sha256Hex(bytes)).toBe(createHash('sha256').update(bytes).digest('hex'));
      }),
      { numRuns: 300 },
    );
  });

  it('writes strings exactly as Python json.dumps does (ensure_ascii)', () => {
    const samples = [...KEYS, '\ud800 lone surrogate', '\u{10ffff}', '</script>', '\u001f\u0000'];
    expect(samples.map(pythonJsonString)).toEqual(python([], samples).dumps);
  });

  it('picks the replica Python picks, for ASCII and non-ASCII keys, whatever the policy', () => {
    const layouts: Array<[string, string, string[]]> = [
      ['rollout', 'policy', ['policy/0']],
      ['rollout', 'policy', ['policy/0', 'policy/1']],
      ['genrm', 'judge', Array.from({ length: 5 }, (_, i) => `judge/${i}`)],
      ['teacher', '数学-teacher', Array.from({ length: 37 }, (_, i) => `数学-teacher/${i}`)],
      ['rollout', 'qwen3-8b', Array.from({ length: 64 }, (_, i) => `engine_${i}`)],
    ];
    const cases: PickCase[] = [];
    for (const [role, model, engines] of layouts)
      for (const key of KEYS.filter((k) => k !== '')) cases.push({ role, model, key, engines });
    const expected = python(cases, []).picks;
    for (const policy of ['round_robin', 'least_outstanding', 'affinity', 'cache_aware'] as const) {
      const selector = new ReplicaSelector();
      const snaps = new Map(layouts.map(([r, m, e]) => [`${r}/${m}/${e.length}`, snap(r, m, e, policy)]));
      const got = cases.map((c) =>
        decide(snaps.get(`${c.role}/${c.model}/${c.engines.length}`)!, selector, c.key),
      );
      expect(got, policy).toEqual(expected);
    }
  });

  it('remembers a key per topology: repeats agree, a new topology recomputes, a filtered request decides afresh', () => {
    const ids = Array.from({ length: 16 }, (_, i) => `policy/${i}`);
    const selector = new ReplicaSelector();
    const keys = KEYS.filter((k) => k !== '');
    const before = snap('rollout', 'policy', ids, 'round_robin');
    const first = keys.map((k) => decide(before, selector, k));
    expect(keys.map((k) => decide(before, selector, k))).toEqual(first);
    // One replica leaves: only its keys move, and they move where Python sends them.
    const gone = first[0]!;
    const after = snap(
      'rollout',
      'policy',
      ids.filter((id) => id !== gone),
      'round_robin',
    );
    const second = keys.map((k) => decide(after, selector, k));
    const expected = python(
      keys.map((key) => ({
        role: 'rollout',
        model: 'policy',
        key,
        engines: ids.filter((id) => id !== gone),
      })),
      [],
    ).picks;
    expect(second).toEqual(expected);
    second.forEach((id, i) => {
      if (first[i] !== gone) expect(id).toBe(first[i]);
    });
    // Excluding the winner (it just failed): the runner-up among the rest, as Python ranks them.
    const r = route(after, requestKeys({}, { 'x-smg-routing-key': keys[1]! }), selector, {
      exclude: new Set([second[1]!]),
    });
    if (r instanceof UisError) throw r;
    const rest = ids.filter((id) => id !== gone && id !== second[1]);
    expect(r.selection.engineId).toBe(
      python([{ role: 'rollout', model: 'policy', key: keys[1]!, engines: rest }], []).picks[0],
    );
  });

  it('keys on session_id / rid only under the affinity policy; the header keys every policy', () => {
    const ids = ['policy/0', 'policy/1', 'policy/2'];
    const rr = snap('rollout', 'policy', ids, 'round_robin');
    const byBody = (s: DiscoverySnapshot, selector: ReplicaSelector) => {
      const r = route(s, requestKeys({ session_id: 'conversation-17' }), selector);
      if (r instanceof UisError) throw r;
      return r.selection.reason;
    };
    expect(byBody(rr, new ReplicaSelector())).toBe('round_robin');
    expect(byBody(snap('rollout', 'policy', ids, 'affinity'), new ReplicaSelector())).toBe('affinity');
  });

  it('is the message Relax hashes', () => {
    expect(affinityMessage('rollout', 'policy', '会话', 'policy/0')).toBe(
      '["rollout","policy","\\u4f1a\\u8bdd","policy/0"]',
    );
    expect(asciiBytes('[]')).toEqual(new Uint8Array([0x5b, 0x5d]));
  });
});
