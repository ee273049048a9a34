import { describe, expect, it } from 'vitest';
import { usageOfBody, usageOfStreamTail } from './usage.ts';

const b = (s: string) => Buffer.from(s);

describe('usageOfBody', () => {
  it.each([
    [
      'chat answer',
      '{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}',
      12,
      5,
    ],
    [
      'chat answer with details and spaces',
      '{"usage": {"prompt_tokens": 7, "prompt_tokens_details": {"cached_tokens": 3}, "completion_tokens" : 2}}',
      7,
      2,
    ],
    ['generate answer', '{"text":"hi","meta_info":{"id":"a","prompt_tokens":4,"completion_tokens":9}}', 4, 9],
    [
      'batch generate answer: one meta_info per prompt',
      '[{"meta_info":{"prompt_tokens":4,"completion_tokens":9}},{"meta_info":{"prompt_tokens":6,"completion_tokens":1}}]',
      10,
      10,
    ],
    [
      'a key inside generated text is escaped and does not count',
      '{"text":"say \\"prompt_tokens\\": 99","meta_info":{"prompt_tokens":3,"completion_tokens":8}}',
      3,
      8,
    ],
  ])('%s', (_name, body, prompt, completion) => {
    expect(usageOfBody(b(body))).toEqual({ prompt, completion });
  });

  it('is undefined when the answer reports no usage', () => {
    expect(usageOfBody(b('{"error":{"message":"bad"}}'))).toBeUndefined();
  });
});

describe('usageOfStreamTail', () => {
  it('takes the last cumulative counts of a /generate stream', () => {
    const tail =
      'data: {"text":"a","meta_info":{"prompt_tokens":5,"completion_tokens":3}}\n\n' +
      'data: {"text":"ab","meta_info":{"prompt_tokens":5,"completion_tokens":4}}\n\ndata: [DONE]\n\n';
    expect(usageOfStreamTail(b(tail))).toEqual({ prompt: 5, completion: 4 });
  });

  it('reads the usage chunk of an OpenAI stream and skips the null usage of content chunks', () => {
    const tail =
      'data: {"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}\n\n' +
      'data: {"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":6,"total_tokens":17}}\n\n' +
      'data: [DONE]\n\n';
    expect(usageOfStreamTail(b(tail))).toEqual({ prompt: 11, completion: 6 });
  });

  it('is undefined for a stream that reported no usage', () => {
    expect(usageOfStreamTail(b('data: {"choices":[],"usage":null}\n\ndata: [DONE]\n\n'))).toBeUndefined();
  });
});
