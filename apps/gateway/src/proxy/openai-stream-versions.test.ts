import { describe, expect, it } from 'vitest';
import { type InPlaceResumes, OpenAIStreamVersions } from './openai-stream-versions.ts';
import { ChunkedScanner } from './upstream/http1.ts';

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

  it('reframed: a chunked body cut at every byte gives the same events, one chunk per read, then the last chunk', () => {
    const events = [chunk('a', 1), chunk('b', 2), usageChunk(2), DONE, 'event: x\ndata: {}\n\n'];
    // uvicorn's framing: one chunk per event; the last event is cut in two chunks.
    const last = events.at(-1)!;
    const pieces = [...events.slice(0, -1), last.slice(0, 5), last.slice(5)];
    const wire = Buffer.from(
      `${pieces.map((p) => `${p.length.toString(16)}\r\n${p}\r\n`).join('')}0\r\n\r\n`,
    );
    const whole = new OpenAIStreamVersions(true, () => ({ count: 0, to: [] }), 'v1', 0);
    const want = whole.push(Buffer.from(events.join(''))).toString() + whole.end().toString();
    for (let cut1 = 1; cut1 < wire.length; cut1++) {
      for (const cut2 of [cut1 + 1, cut1 + 9, wire.length]) {
        const s = new OpenAIStreamVersions(true, () => ({ count: 0, to: [] }), 'v1', 0);
        s.reframe();
        const reads = [wire.subarray(0, cut1), wire.subarray(cut1, cut2), wire.subarray(cut2)];
        const out = [...reads.map((r) => s.push(r)), s.end()];
        // Every output is empty or whole chunks: decoded in one go, it is the rewrite of the whole stream.
        const decoded: string[] = [];
        const scanner = new ChunkedScanner();
        for (const o of out) {
          if (o.length === 0) continue;
          const before = decoded.length;
          const end = scanner.scan(o, 0, (d) => decoded.push(d.toString()));
          expect(decoded.length > before || end === o.length, `cuts ${cut1}/${cut2}`).toBe(true);
        }
        expect(scanner.done, `cuts ${cut1}/${cut2}`).toBe(true);
        expect(decoded.join(''), `cuts ${cut1}/${cut2}`).toBe(want);
      }
    }
  });

  it('reframed: several events in one read leave in one chunk', () => {
    const s = new OpenAIStreamVersions(true, () => ({ count: 0, to: [] }), 'v1', 0);
    s.reframe();
    const a = chunk('a', 1);
    const b = chunk('b', 2);
    const out = s.push(
      Buffer.from(`${a.length.toString(16)}\r\n${a}\r\n${b.length.toString(16)}\r\n${b}\r\n`),
    );
    const text = out.toString();
    const size = Number.parseInt(text.slice(0, text.indexOf('\r\n')), 16);
    expect(text.length).toBe(text.indexOf('\r\n') + 2 + size + 2);
    const sent = events(text.slice(text.indexOf('\r\n') + 2, -2));
    expect(sent.map((e) => [e.data.system_fingerprint, e.data.usage])).toEqual([
      ['v1', null],
      ['v1', null],
    ]);
    expect(s.end().toString()).toBe('0\r\n\r\n');
  });

  it('takes chunks too short to hold a choice as they are', () => {
    const s = new OpenAIStreamVersions(true, () => ({ count: 0, to: [] }), 'v1', 0);
    const short = 'data: {"choices":[]}\n\ndata: {"choices":[\n\n';
    expect(relay(s, [short])).toBe(
      'data: {"choices":[],"system_fingerprint":"v1"}\n\ndata: {"choices":[\n\n',
    );
  });

  it('finds the counts wherever the usage is in the chunk', () => {
    const resumes: InPlaceResumes = { count: 0, to: [] };
    const s = new OpenAIStreamVersions(true, () => resumes, 'v1', 0);
    const notLast = chunk('a', 1).replace(/"usage":(\{.*\})\}\n\n$/, '"usage":$1,"x":{"y":2}}\n\n');
    const out = events(relay(s, [notLast, chunk('b', 2), DONE]));
    expect(out.slice(0, 2).map((e) => [e.data.usage, e.data.x, e.data.system_fingerprint])).toEqual([
      [null, { y: 2 }, 'v1'],
      [null, undefined, 'v1'],
    ]);
    expect(s.declared().spans).toEqual([{ version: 'v1', start: 0, end: 2 }]);
  });
});
