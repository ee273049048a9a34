import type { InferenceManager } from '@uis/manager';
import { describe, expect, it } from 'vitest';
import { forwardedBody, type ParsedBody, parseServingBody } from '../proxy/body.ts';
import { AnswerVersions } from './answer-versions.ts';

const manager = {
  resumedInPlace: () => ({ count: 0, to: [] }),
  servedBeforeInPlace: () => [],
} as unknown as InferenceManager;

const versions = new AnswerVersions(manager, [
  { name: 'policy', weight_source: 'disk', openai_stream_versions: true },
  { name: 'plain', weight_source: 'disk', openai_stream_versions: false },
  { name: 'judge', weight_source: 'static', openai_stream_versions: true },
]);

function body(json: unknown): ParsedBody {
  return parseServingBody(Buffer.from(JSON.stringify(json))) as ParsedBody;
}

/** What the engine gets: the client's body with the route's edit. */
function sent(model: string, b: ParsedBody): Record<string, unknown> {
  const f = forwardedBody(b, versions.openAIEdit(model, 'served', b), undefined);
  return JSON.parse(f.prefix + f.bytes.toString());
}

describe('AnswerVersions', () => {
  it("asks the engine for usage counts on an OpenAI stream, merged into the client's stream_options", () => {
    const b = body({ model: 'policy', stream: true, stream_options: { include_usage: true }, messages: [] });
    expect(sent('policy', b).stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
    expect(versions.openAI('policy', b).stream).toBeDefined();
    expect(sent('policy', body({ model: 'policy', stream: true })).stream_options).toEqual({
      continuous_usage_stats: true,
    });
  });

  it('leaves a non-streamed request, an opted-out model and a static model as they are', () => {
    for (const [model, b] of [
      ['policy', body({ model: 'policy', messages: [] })],
      ['plain', body({ model: 'plain', stream: true })],
      ['judge', body({ model: 'judge', stream: true })],
    ] as const) {
      expect(sent(model, b).stream_options).toBeUndefined();
      expect(versions.openAI(model, b).stream).toBeUndefined();
    }
  });

  it('leaves stream_options that are not an object for the engine to refuse', () => {
    const b = body({ model: 'policy', stream: true, stream_options: 'yes' });
    expect(sent('policy', b).stream_options).toBe('yes');
    expect(versions.openAI('policy', b).stream).toBeUndefined();
  });
});
