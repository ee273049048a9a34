import { describe, expect, it } from 'vitest';
import { promptText, requestKeys } from './request-keys.ts';
import { compareWeightVersions, meetsMinWeightVersion } from './weight-version.ts';

describe('requestKeys', () => {
  it('reads model, route key, affinity key, session key and min version from body and headers', () => {
    const keys = requestKeys(
      { model: 'm', route_key: 'math', rid: 'r1', text: 'hi' },
      new Headers({ 'X-SMG-Routing-Key': 'conv-7', 'X-Min-Weight-Version': '12' }),
    );
    expect(keys).toEqual({
      model: 'm',
      routeKey: 'math',
      affinityKey: 'conv-7',
      sessionKey: 'r1',
      minWeightVersion: '12',
      prompt: 'hi',
    });
  });

  it('the session key is session_id, session_params.id, then rid; plain header records work', () => {
    expect(requestKeys({ session_id: 's', rid: 'r' }).sessionKey).toBe('s');
    expect(requestKeys({ session_params: { id: 'p' }, rid: 'r' }).sessionKey).toBe('p');
    expect(requestKeys({ rid: 'r' }).sessionKey).toBe('r');
    expect(requestKeys({ rid: ['r1', 'r2'] }).sessionKey).toBeUndefined();
    // Only the header gives an affinity key (keyed whatever the policy); body ids never do.
    expect(requestKeys({ session_id: 's' }).affinityKey).toBeUndefined();
    expect(requestKeys({}, { 'X-Route-Key': 'code', 'x-smg-routing-key': 'k' })).toMatchObject({
      routeKey: 'code',
      affinityKey: 'k',
    });
    expect(requestKeys({}, { 'x-session': 'k' }, 'X-Session').affinityKey).toBe('k');
  });

  it('leaves the prompt out when the caller asks so (it builds it only for cache_aware)', () => {
    const chat = { model: 'm', messages: [{ role: 'user', content: 'long prompt' }] };
    expect(requestKeys(chat).prompt).toBe('user:long prompt\n');
    expect(requestKeys(chat, undefined, undefined, false)).toEqual({
      model: 'm',
      routeKey: undefined,
      affinityKey: undefined,
      sessionKey: undefined,
      minWeightVersion: undefined,
      prompt: undefined,
    });
  });

  it('never throws on junk', () => {
    for (const junk of [null, undefined, 42, 'str', [], { model: 5, messages: 'no', text: {} }]) {
      expect(() => requestKeys(junk)).not.toThrow();
    }
    expect(requestKeys({ model: 5 }).model).toBeUndefined();
  });

  it('extracts the prompt text of generate, completions, chat and token-id bodies', () => {
    expect(promptText({ text: ['a', 'b'] })).toBe('a');
    expect(promptText({ prompt: 'p' })).toBe('p');
    expect(
      promptText({
        messages: [
          { role: 'system', content: 'S' },
          { role: 'user', content: [{ type: 'text', text: 'U' }] },
        ],
      }),
    ).toBe('system:S\nuser:U\n');
    expect(promptText({ input_ids: [1, 2, 3] })).toBe('1 2 3');
    expect(promptText({ input_ids: [[4, 5]] })).toBe('4 5');
    expect(promptText({})).toBeUndefined();
  });
});

describe('weight versions', () => {
  const cases: Array<[string, string, number]> = [
    ['9', '10', -1],
    ['10', '10', 0],
    ['10.5', '10', 1],
    ['v9', 'v10', 1],
    ['step-0010', 'step-0009', 1],
    ['10', 'v1', -1],
  ];
  for (const [a, b, expected] of cases) {
    it(`${a} vs ${b} -> ${expected}`, () => expect(compareWeightVersions(a, b)).toBe(expected));
  }
  it('a replica without a version never meets a minimum', () => {
    expect(meetsMinWeightVersion(null, '0')).toBe(false);
    expect(meetsMinWeightVersion('3', '3')).toBe(true);
  });
});
