import { isUisError } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { genrmChatBody, genrmResponse, parseGenrmRequest } from './genrm-adapter.ts';

const messages = [{ role: 'user', content: 'Is it right?' }];
const model = (sampling_defaults = {}, chat_template_kwargs = {}) => ({
  sampling_defaults,
  chat_template_kwargs,
});

describe('GenRM messages adapter', () => {
  it.each([
    {
      name: 'Relax defaults when nothing overrides them',
      model: model(),
      req: { messages },
      want: { temperature: 0.2, top_p: 1.0, top_k: -1, max_tokens: 1024 },
    },
    {
      name: "the model's sampling defaults override Relax's",
      model: model({ temperature: 0.6, max_new_tokens: 256 }),
      req: { messages },
      want: { temperature: 0.6, top_p: 1.0, top_k: -1, max_tokens: 256 },
    },
    {
      name: "the request's sampling_params override the model's",
      model: model({ temperature: 0.6, max_new_tokens: 256 }),
      req: { messages, sampling_params: { temperature: 0, max_new_tokens: 8, stop: ['</s>'] } },
      want: { temperature: 0, top_p: 1.0, top_k: -1, max_tokens: 8, stop: ['</s>'] },
    },
    {
      name: "Relax's max_response_len is the token budget",
      model: model({ max_response_len: 64 }),
      req: { messages, sampling_params: null },
      want: { temperature: 0.2, max_tokens: 64 },
    },
  ])('$name', ({ model: m, req, want }) => {
    const parsed = parseGenrmRequest(req);
    if (isUisError(parsed)) throw parsed;
    const body = genrmChatBody(parsed, m, 'served-judge');
    expect(body).toMatchObject({ ...want, model: 'served-judge', messages, stream: false });
    expect(body).not.toHaveProperty('max_new_tokens');
    expect(body).not.toHaveProperty('max_response_len');
  });

  it('merges chat_template_kwargs: model, then sampling params, then the request', () => {
    const parsed = parseGenrmRequest({
      messages,
      sampling_params: { chat_template_kwargs: { enable_thinking: true, a: 1 } },
      chat_template_kwargs: { a: 2 },
    });
    if (isUisError(parsed)) throw parsed;
    const body = genrmChatBody(parsed, model({}, { enable_thinking: false, b: 3 }), 'j');
    expect(body.chat_template_kwargs).toEqual({ enable_thinking: true, a: 2, b: 3 });
    const plain = parseGenrmRequest({ messages });
    if (isUisError(plain)) throw plain;
    expect(genrmChatBody(plain, model(), 'j')).not.toHaveProperty('chat_template_kwargs');
  });

  // Relax's rules, from its GenRM service (a pydantic body model: 422) and its gateway (mixing: 400, checked after).
  it.each([
    { name: 'messages missing', body: {}, status: 422, path: 'body.messages' },
    { name: 'messages null', body: { messages: null }, status: 422, path: 'body.messages' },
    { name: 'messages not a list', body: { messages: 'hi' }, status: 422, path: 'body.messages' },
    { name: 'a message not an object', body: { messages: ['hi'] }, status: 422, path: 'body.messages[0]' },
    { name: 'an empty conversation', body: { messages: [] }, status: 422, path: 'body.messages' },
    { name: 'a message without content', body: { messages: [{ role: 'user' }] }, status: 422 },
    { name: 'sampling_params not an object', body: { messages, sampling_params: 3 }, status: 422 },
    { name: 'messages with text', body: { messages, text: 'x' }, status: 400, path: 'body.text' },
    {
      name: 'messages with input_ids',
      body: { messages, input_ids: [1] },
      status: 400,
      path: 'body.input_ids',
    },
    { name: 'messages with stream', body: { messages, stream: true }, status: 400, path: 'body.stream' },
    { name: 'a bad conversation before mixing', body: { messages: 'x', text: 'x' }, status: 422 },
    { name: 'a body that is no object', body: [messages], status: 400 },
  ])('refuses $name with $status and the path of the problem', ({ body, status, path }) => {
    const r = parseGenrmRequest(body);
    if (!isUisError(r)) throw new Error(`accepted ${JSON.stringify(body)}`);
    expect(r.status).toBe(status);
    expect(r.code).toBe(status === 422 ? 'invalid_genrm_messages' : 'invalid_body');
    if (path !== undefined) expect(r.path).toBe(path);
    else expect(r.path?.startsWith('body')).toBe(true);
  });

  it('takes a conversation that does not stream, in any spelling Python reads as false', () => {
    for (const stream of [false, 0, '', null, [], {}]) {
      expect(isUisError(parseGenrmRequest({ messages, stream }))).toBe(false);
    }
  });

  it('answers {"response"} with the text stripped, and 502 on an answer without a message', () => {
    expect(genrmResponse({ choices: [{ message: { content: '  Judgement: 1\n' } }] })).toEqual({
      response: 'Judgement: 1',
    });
    expect(genrmResponse({ choices: [{ message: { content: null } }] })).toEqual({ response: '' });
    const bad = genrmResponse({ choices: [] });
    expect(isUisError(bad) && bad.status).toBe(502);
  });
});
