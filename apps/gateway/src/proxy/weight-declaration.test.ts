import { describe, expect, it } from 'vitest';
import { answerWeightVersion, declarationHeaders, withFingerprint } from './weight-declaration.ts';

describe('weight declaration', () => {
  it.each([
    ['{"text":"a","meta_info":{"id":"r","weight_version":"7"}}', '7'],
    ['{"metadata":{"weight_version": "step-3"},"id":"x"}', 'step-3'],
    ['[{"meta_info":{"weight_version":"1"}},{"meta_info":{"weight_version":"2"}}]', '2'],
    ['{"meta_info":{"weight_version":null}}', null],
    ['{"text":"no version"}', null],
    ['{"meta_info":{"weight_version":"a\\"b"}}', null],
  ])('reads the last token version of %s', (body, expected) => {
    expect(answerWeightVersion(Buffer.from(body))).toBe(expected);
  });

  it('declares every version a request ran on, oldest first, once each', () => {
    expect(declarationHeaders({ weightVersion: '3', earlier: [] })).toEqual(['x-uis-weight-version', '3']);
    expect(declarationHeaders({ weightVersion: '3', earlier: ['3'] })).toEqual(['x-uis-weight-version', '3']);
    expect(declarationHeaders({ weightVersion: '3', earlier: ['1', '2'] })).toEqual([
      'x-uis-weight-version',
      '3',
      'x-uis-weight-versions',
      '1,2,3',
    ]);
    expect(declarationHeaders({ weightVersion: null, earlier: ['1'] })).toEqual([]);
  });

  it('sets system_fingerprint in an OpenAI answer unless the engine set one', () => {
    const out = withFingerprint(Buffer.from('{"id":"c","choices":[]}\n'), 'v2');
    expect(JSON.parse(out.toString())).toEqual({ id: 'c', choices: [], system_fingerprint: 'v2' });
    const own = Buffer.from('{"system_fingerprint":"fp","id":"c"}');
    expect(withFingerprint(own, 'v2')).toBe(own);
    const notObject = Buffer.from('[1]');
    expect(withFingerprint(notObject, 'v2')).toBe(notObject);
  });
});
