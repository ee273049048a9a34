import { describe, expect, it } from 'vitest';
import { answerVersionSpans, StreamVersionSpans } from './answer-versions.ts';

describe('which version produced which output tokens of an answer', () => {
  it.each([
    [
      'SGLang spans of a /generate answer',
      {
        output_ids: [1, 2, 3, 4, 5],
        meta_info: {
          completion_tokens: 5,
          weight_version: 'v2',
          weight_versions: [
            { version: 'v1', start: 0, end: 2 },
            { version: 'v2', start: 2, end: 5 },
          ],
        },
      },
      [
        { version: 'v1', start: 0, end: 2 },
        { version: 'v2', start: 2, end: 5 },
      ],
    ],
    [
      'SGLang spans of an OpenAI answer',
      {
        usage: { completion_tokens: 3 },
        metadata: { weight_version: 'v1', weight_versions: [{ version: 'v1', start: 0, end: 3 }] },
      },
      [{ version: 'v1', start: 0, end: 3 }],
    ],
    [
      'several versions, change unknown',
      { meta_info: { completion_tokens: 4, weight_version: 'v2', uis_weight_versions: ['v1', 'v2'] } },
      [{ version: null, start: 0, end: 4 }],
    ],
    [
      'one version',
      { output_ids: [7, 8], meta_info: { weight_version: 'v3' } },
      [{ version: 'v3', start: 0, end: 2 }],
    ],
    [
      'malformed spans fall back to the version',
      { meta_info: { completion_tokens: 2, weight_version: 'v3', weight_versions: [{ version: 'v3' }] } },
      [{ version: 'v3', start: 0, end: 2 }],
    ],
    ['not an answer', 'x', []],
  ])('%s', (_name, answer, spans) => {
    expect(answerVersionSpans(answer)).toEqual(spans);
  });

  it("splits a stream without spans where its chunks change version; the finished chunk's spans win", () => {
    const chunk = (ids: number[], version: string, spans?: unknown) => ({
      output_ids: ids,
      meta_info: { completion_tokens: ids.length, weight_version: version, weight_versions: spans },
    });
    const s = new StreamVersionSpans();
    for (const [ids, v] of [
      [[4], 'v1'],
      [[4, 5], 'v1'],
      [[4, 5, 6], 'v2'],
      [[4, 5, 6, 7], 'v2'],
    ] as const)
      s.add(chunk([...ids], v));
    expect(s.spans).toEqual([
      { version: 'v1', start: 0, end: 2 },
      { version: 'v2', start: 2, end: 4 },
    ]);
    s.add(chunk([4, 5, 6, 7], 'v2', [{ version: 'v2', start: 0, end: 4 }]));
    expect(s.spans).toEqual([{ version: 'v2', start: 0, end: 4 }]);
  });

  describe('an OpenAI stream through the gateway', () => {
    const chat = (content: string, fingerprint: string, usage?: number) => ({
      choices: [{ index: 0, delta: content === '' ? { role: 'assistant' } : { content } }],
      system_fingerprint: fingerprint,
      usage: usage === undefined ? null : { completion_tokens: usage },
    });
    const feed = (events: unknown[]) => {
      const s = new StreamVersionSpans();
      for (const e of events) s.add(e);
      return s.spans;
    };
    const split = [chat('', 'v1'), chat('a', 'v1'), chat('b', 'v1'), chat('c', 'v2')];

    it('the event after [DONE] gives the spans; without it, fingerprints alone are no index', () => {
      const spans = [
        { version: 'v1', start: 0, end: 2 },
        { version: 'v2', start: 2, end: 3 },
      ];
      expect(feed([...split, { weight_version: 'v2', weight_versions: spans }])).toEqual(spans);
      expect(feed(split)).toEqual([{ version: null, start: 0, end: 3 }]);
      // The versions without an index (SGLang 0.5.2, n > 1): unknown, not guessed.
      expect(feed([...split, { weight_version: 'v2', uis_weight_versions: ['v1', 'v2'] }])).toEqual([
        { version: null, start: 0, end: 3 },
      ]);
    });

    it('one version: one span of its fingerprint; counts from continuous usage split it as the chunks say', () => {
      expect(feed([chat('', 'v1'), chat('a', 'v1'), chat('b', 'v1')])).toEqual([
        { version: 'v1', start: 0, end: 2 },
      ]);
      const completions = (text: string, fingerprint: string, usage: number) => ({
        choices: [{ index: 0, text }],
        system_fingerprint: fingerprint,
        usage: { completion_tokens: usage },
      });
      expect(
        feed([completions('ab', 'v1', 2), completions('c', 'v2', 3), { choices: [], usage: null }]),
      ).toEqual([
        { version: 'v1', start: 0, end: 2 },
        { version: 'v2', start: 2, end: 3 },
      ]);
    });
  });
});
