import { describe, expect, it } from 'vitest';
import { type InPlaceResumes, OpenAIStreamVersions } from './openai-stream-versions.ts';

// SGLang's chunk shapes (serving_completions.py, model_dump_json: usage last, null when not asked for).
const usage = (n: number) =>
  `{"prompt_tokens":3,"total_tokens":${3 + n},"completion_tokens":${n},"prompt_tokens_details":{"cached_tokens":0},"reasoning_tokens":0}`;
const chunk = (text: string, n: number | null) =>
  `data: {"id":"r","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"${text}","logprobs":null,"finish_reason":null}],"usage":${n === null ? 'null' : usage(n)}}\n\n`;
const usageChunk = (n: number) =>
  `data: {"id":"r","object":"text_completion","created":1,"model":"m","choices":[],"usage":${usage(n)}}\n\n`;
const DONE = 'data: [DONE]\n\n';

function relay(s: OpenAIStreamVersions, parts: string[]): string {
  return parts.map((p) => s.push(Buffer.from(p)).toString()).join('') + s.end().toString();
}

function events(text: string) {
  return text
    .split('\n\n')
    .filter((e) => e !== '')
    .map((e) => {
      const name = /^event: (.*)$/m.exec(e)?.[1];
      const data = /^data: (.*)$/m.exec(e)?.[1] as string;
      return { name, data: data === '[DONE]' ? data : JSON.parse(data) };
    });
}

describe('OpenAIStreamVersions', () => {
  it('splits at the tokens counted before the continue, strips the counts, and names the spans after [DONE]', () => {
    const resumes: InPlaceResumes = { count: 2, to: ['v1'] };
    const s = new OpenAIStreamVersions(true, () => resumes, 'v1', 2);
    const before = s.push(Buffer.from(chunk('a', 1) + chunk('b', 2))).toString();
    resumes.count = 3;
    resumes.to = ['v1', 'v2'];
    // Events split across reads are rewritten once whole.
    const c = chunk('c', 4);
    const after = relay(s, [c.slice(0, 20), c.slice(20) + chunk('d', 5), DONE]);
    const out = events(before + after);
    expect(out.map((e) => (e.data === '[DONE]' ? e.data : e.data.system_fingerprint))).toEqual([
      'v1',
      'v1',
      'v2',
      'v2',
      '[DONE]',
      undefined,
    ]);
    for (const e of out.slice(0, 4)) expect(e.data.usage).toBeNull();
    expect(out[5]).toEqual({
      name: 'uis_weight_versions',
      data: {
        weight_version: 'v2',
        weight_versions: [
          { version: 'v1', start: 0, end: 2 },
          { version: 'v2', start: 2, end: 5 },
        ],
      },
    });
  });

  it("keeps the client's own counts and its include_usage chunk", () => {
    const resumes: InPlaceResumes = { count: 0, to: [] };
    const s = new OpenAIStreamVersions(false, () => resumes, 'v1', 0);
    const out = events(relay(s, [chunk('a', 1), usageChunk(1), DONE]));
    expect(out.map((e) => (e.data === '[DONE]' ? e.data : e.data.usage?.completion_tokens))).toEqual([
      1,
      1,
      '[DONE]',
    ]);
    expect(s.declared()).toEqual({
      version: 'v1',
      spans: [{ version: 'v1', start: 0, end: 1 }],
      versions: ['v1'],
    });
  });

  it('without counts (SGLang 0.5.2) names the versions in order, without an index', () => {
    const resumes: InPlaceResumes = { count: 0, to: [] };
    const s = new OpenAIStreamVersions(true, () => resumes, 'v1', 0);
    s.push(Buffer.from(chunk('a', null)));
    resumes.count = 1;
    resumes.to = ['v2'];
    const out = events(relay(s, [chunk('b', null), DONE]));
    expect(out.at(-1)).toEqual({
      name: 'uis_weight_versions',
      data: { weight_version: 'v2', uis_weight_versions: ['v1', 'v2'] },
    });
  });

  it('names the versions without an index when several choices count their tokens each', () => {
    const resumes: InPlaceResumes = { count: 0, to: [] };
    const s = new OpenAIStreamVersions(true, () => resumes, 'v1', 0);
    s.push(Buffer.from(chunk('a', 1) + chunk('b', 1).replace('"index":0', '"index":1')));
    resumes.count = 1;
    resumes.to = ['v2'];
    const out = events(relay(s, [chunk('c', 2), DONE]));
    expect(out.at(-1)?.data).toEqual({ weight_version: 'v2', uis_weight_versions: ['v1', 'v2'] });
  });

  it('behind an SGLang router (engine unknown) only takes the counts back out', () => {
    const s = new OpenAIStreamVersions(true, null, 'v1', 0);
    const out = events(relay(s, [chunk('a', 1), chunk('b', 2), DONE]));
    expect(
      out.map((e) => (e.data === '[DONE]' ? e.data : [e.data.usage, e.data.system_fingerprint])),
    ).toEqual([[null, undefined], [null, undefined], '[DONE]']);
  });

  it('leaves out a version that made no token (picked while its replica was paused)', () => {
    const resumes: InPlaceResumes = { count: 0, to: [] };
    const s = new OpenAIStreamVersions(true, () => resumes, 'v1', 0);
    resumes.count = 1;
    resumes.to = ['v2'];
    const out = events(relay(s, [chunk('a', 1), chunk('b', 2), DONE]));
    expect(out.map((e) => (e.data === '[DONE]' ? e.data : e.data.system_fingerprint))).toEqual([
      'v2',
      'v2',
      '[DONE]',
    ]);
    expect(s.declared().spans).toEqual([{ version: 'v2', start: 0, end: 2 }]);
  });
});
