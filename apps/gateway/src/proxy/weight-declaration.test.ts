import { describe, expect, it } from 'vitest';
import {
  declarationHeaders,
  declarationOf,
  readAnswerVersions,
  withFingerprint,
  withUnsplitVersions,
} from './weight-declaration.ts';

const spans2 = '[{"version":"v1","start":0,"end":4},{"version":"v2","start":4,"end":9}]';

describe('weight declaration', () => {
  it.each([
    ['{"text":"a","meta_info":{"id":"r","weight_version":"7"}}', '7'],
    ['{"metadata":{"weight_version": "step-3"},"id":"x"}', 'step-3'],
    ['[{"meta_info":{"weight_version":"1"}},{"meta_info":{"weight_version":"2"}}]', '2'],
    ['{"meta_info":{"weight_version":null}}', null],
    ['{"text":"no version"}', null],
    ['{"meta_info":{"weight_version":"a\\"b"}}', null],
    [`{"meta_info":{"weight_version":"v2","weight_versions":${spans2}}}`, 'v2'],
    ['{"meta_info":{"weight_version":"v2","weight_versions":[{"version":"v2","start":0}]}}', null],
    ['{"meta_info":{"weight_version":"v2","weight_versions":[{"version":"v]","start":0,"end":1}]}}', null],
  ])('reads the last token version of %s', (body, expected) => {
    expect(readAnswerVersions(Buffer.from(body)).version).toBe(expected);
  });

  // The spans are read byte by byte when SGLang wrote them plainly; every other text goes through JSON.parse.
  // Both must read the same: the reference is the parse of the text up to the list's first ']'.
  it.each([
    '[{"version": "v1", "start": 0, "end": 4}, {"version": "v2", "start": 4, "end": 9}]',
    '[ {"end":9,"start":4,"version":"v2"} ]',
    '[{"version":"v1","start":0,"end":4},\n{"version":"v2","start":4,"end":9}]',
    '[]',
    '[{"version":"v1","start":0,"end":4,"x":1}]',
    '[{"version":"v1","start":0,"version":"v2","end":4}]',
    '[{"version":"v\\u0031","start":0,"end":4}]',
    '[{"version":"v1","start":-1,"end":4}]',
    '[{"version":"v1","start":0.5,"end":4}]',
    '[{"version":"v1","start":1e2,"end":4}]',
    '[{"version":"v1","start":01,"end":4}]',
    '[{"version":"v1","start":0,"end":123456789012345678}]',
    '[{"version":"v]1","start":0,"end":4}]',
    '[{"version":"v1","start":0}]',
    '[{"version":"v1","start":0,"end":4},]',
    '[{"version":"\u00e9t\u00e9","start":0,"end":4}]',
    '[{"version":1,"start":0,"end":4}]',
    '[{"version":"v1","start":0,"end":4}',
  ])('reads the spans %s as their JSON parse does', (list) => {
    const text = JSON.parse(`"${list.replaceAll('"', '\\"').replaceAll('\n', '\\n')}"`) as string;
    const body = Buffer.from(`{"meta_info":{"weight_version":"v","weight_versions":${text}}}`);
    const close = text.indexOf(']');
    let expected: unknown = null;
    try {
      const parsed = JSON.parse(text.slice(0, close + 1)) as Array<Record<string, unknown>>;
      const ok =
        parsed.length > 0 &&
        parsed.every(
          (s) => typeof s.version === 'string' && Number.isInteger(s.start) && Number.isInteger(s.end),
        );
      expected = ok ? parsed : null;
    } catch {
      expected = null;
    }
    const read = readAnswerVersions(body);
    expect(read.spans).toEqual(expected);
    if (expected !== null)
      expect(read.end).toBe(body.indexOf(text) + Buffer.byteLength(text.slice(0, close + 1)));
  });

  it('finds the last weight_version wherever it is, near the end or far before it', () => {
    const key = Buffer.from('"weight_version');
    for (const tail of [0, 1, 200, 230, 240, 241, 242, 250, 255, 256, 257, 300, 5000])
      for (const gap of [0, 1, 10, 300]) {
        const body = Buffer.from(
          `{"a":{"weight_version":"old"},${'x'.repeat(gap)}"meta_info":{"weight_version":"v${tail}"},"t":"${'y'.repeat(tail)}"}`,
        );
        const read = readAnswerVersions(body);
        expect(read.version, `tail ${tail} gap ${gap}`).toBe(`v${tail}`);
        expect(read.end).toBe(body.lastIndexOf(key) + key.length + 4 + `v${tail}`.length);
      }
    expect(readAnswerVersions(Buffer.from(`{"t":"${'y'.repeat(1000)}"}`)).version).toBeNull();
    expect(readAnswerVersions(Buffer.from('"weight_versio')).version).toBeNull();
  });

  it('reads each answer its own version (the last one read is kept as text, not mistaken for the next)', () => {
    const answer = (v: string) =>
      Buffer.from(
        `{"meta_info":{"weight_version":"${v}","weight_versions":[{"version":"${v}","start":0,"end":4}]}}`,
      );
    const long = `v${'9'.repeat(70)}`;
    // [the version as JSON text, as read]: an escape goes through the parse.
    for (const [text, v] of [
      ['v1', 'v1'],
      ['v2', 'v2'],
      ['v2', 'v2'],
      ['v1', 'v1'],
      ['w1', 'w1'],
      ['\\u00e9t\\u00e9', '\u00e9t\u00e9'],
      ['été', 'été'],
      ['ete', 'ete'],
      [long, long],
      [long, long],
      ['v1', 'v1'],
      ['', ''],
    ])
      expect(readAnswerVersions(answer(text!)).spans?.[0]?.version, text).toBe(v);
  });

  it("reads SGLang's spans and declares their versions, ignoring what the replica served", () => {
    const read = readAnswerVersions(
      Buffer.from(`{"metadata":{"weight_version":"v2","weight_versions":${spans2}}}`),
    );
    expect(read.spans).toEqual([
      { version: 'v1', start: 0, end: 4 },
      { version: 'v2', start: 4, end: 9 },
    ]);
    const d = declarationOf(read, 'v9', () => ['v0'], undefined);
    expect(d).toEqual({ weightVersion: 'v2', earlier: ['v1'] });
    expect(declarationHeaders(d)).toEqual(['x-uis-weight-version', 'v2', 'x-uis-weight-versions', 'v1,v2']);
    // Without spans: the answer's version (else the replica's) and the versions served before in-place switches.
    const plain = readAnswerVersions(Buffer.from('{"meta_info":{"weight_version":"v2"}}'));
    expect(declarationOf(plain, 'v9', (t: string) => [t], 'v1')).toEqual({
      weightVersion: 'v2',
      earlier: ['v1'],
    });
    expect(declarationOf(readAnswerVersions(Buffer.from('{}')), 'v9', () => [], undefined)).toEqual({
      weightVersion: 'v9',
      earlier: [],
    });
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

  it('names the versions of a span-less answer beside its weight_version, without a change index', () => {
    const body = Buffer.from('{"text":"a","meta_info":{"id":"r","weight_version":"v2","e2e_latency":1}}');
    const out = withUnsplitVersions(body, readAnswerVersions(body), ['v1', 'v2']);
    expect(JSON.parse(out.toString())).toEqual({
      text: 'a',
      meta_info: { id: 'r', weight_version: 'v2', uis_weight_versions: ['v1', 'v2'], e2e_latency: 1 },
    });
    const batch = Buffer.from('[{"meta_info":{"weight_version":"v2"}}]');
    expect(withUnsplitVersions(batch, readAnswerVersions(batch), ['v1', 'v2'])).toBe(batch);
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
