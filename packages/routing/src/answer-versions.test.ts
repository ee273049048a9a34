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
});
