import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';

/** Rollout, GenRM and teacher all resident; rollout also answers to the alias "judge", which GenRM serves as a
 * model id: the one name two roles share. */
function config() {
  const c = splitTestConfig();
  c.roles.rollout!.routing.aliases = { actor: 'policy', judge: 'policy' };
  return c;
}

const gw = gatewayOnSims({ config: config(), server: { adminToken: 'the-admin-token' } });
const client = (base: string) => new OpenAI({ baseURL: `${gw.url}${base}`, apiKey: 'unused', maxRetries: 0 });
const hi = [{ role: 'user' as const, content: 'hi' }];

async function openAIError(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await call;
  } catch (e) {
    if (e instanceof OpenAI.APIError) return e;
    throw e;
  }
  throw new Error('the call succeeded');
}

describe('OpenAI surface: the official openai client, per role and at the root', () => {
  it('serves /<role>/v1/completions plain and streaming', async () => {
    const rollout = client('/rollout/v1');
    const plain = await rollout.completions.create({ model: 'actor', prompt: 'Once upon', max_tokens: 8 });
    expect(plain.object).toBe('text_completion');
    expect(plain.model).toBe('policy'); // the alias reached the engine as its served name
    expect(plain.choices[0]!.text.length).toBeGreaterThan(0);
    expect(plain.usage!.completion_tokens).toBe(8);
    const stream = await rollout.completions.create({
      model: 'policy-code',
      prompt: 'def f():',
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const text = chunks.map((c) => c.choices[0]?.text ?? '').join('');
    expect(chunks.length).toBeGreaterThan(2);
    expect(text.length).toBeGreaterThan(0);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe('length');
    expect(chunks.at(-1)!.usage!.completion_tokens).toBe(12);
  });

  it('lists every role’s models at /v1/models, each naming its role', async () => {
    const models = await client('/v1').models.list();
    const byId = models.data.map((m) => `${(m as unknown as { role: string }).role}:${m.id}`);
    expect(byId).toEqual(
      expect.arrayContaining([
        'rollout:policy',
        'rollout:policy-code',
        'rollout:actor',
        'genrm:judge',
        'teacher:math-teacher',
      ]),
    );
  });

  it('routes root chat and completions to the role serving the model, plain and streaming', async () => {
    const root = client('/v1');
    const teacher = await root.chat.completions.create({
      model: 'math-teacher',
      messages: hi,
      max_tokens: 4,
    });
    expect(teacher.model).toBe('math-teacher');
    const before = gw.launcher.serversOf('math-teacher/0')[0]!.stats().requests;
    const stream = await root.chat.completions.create({
      model: 'math-teacher',
      messages: hi,
      max_tokens: 6,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    expect(gw.launcher.serversOf('math-teacher/0')[0]!.stats().requests).toBe(before + 1);
    const code = await root.completions.create({ model: 'policy-code', prompt: 'x', max_tokens: 3 });
    expect(code.choices[0]!.text.length).toBeGreaterThan(0);
    const streamed = await root.completions.create({
      model: 'actor',
      prompt: 'x',
      max_tokens: 5,
      stream: true,
    });
    let n = 0;
    for await (const chunk of streamed) n += chunk.choices[0]?.text.length ?? 0;
    expect(n).toBeGreaterThan(0);
    // Counted by the role that served it: nothing stays in flight.
    expect(gw.server.inFlight()).toBe(0);
  });

  it('answers OpenAI’s error shape on OpenAI routes, keeping code, path and details', async () => {
    const unknown = await openAIError(
      client('/v1').chat.completions.create({ model: 'gpt-9', messages: hi }),
    );
    expect(unknown.status).toBe(404);
    expect(unknown.error).toMatchObject({
      type: 'invalid_request_error',
      code: 'unknown_model',
      param: 'model',
      path: 'body.model',
    });
    const ambiguous = await openAIError(client('/v1').completions.create({ model: 'judge', prompt: 'x' }));
    expect(ambiguous.status).toBe(400);
    expect(ambiguous.code).toBe('ambiguous_model');
    expect(ambiguous.message).toContain('rollout, genrm');
    expect((ambiguous.error as { details: unknown }).details).toMatchObject({
      candidates: [
        { role: 'rollout', url: '/rollout/v1' },
        { role: 'genrm', url: '/genrm/v1' },
      ],
    });
    const perRole = await openAIError(
      client('/rollout/v1').completions.create({ model: 'gpt-9', prompt: 'x' }),
    );
    // A role's routes answer Relax's 400; the root routes keep OpenAI's 404 above.
    expect(perRole.status).toBe(400);
    expect(perRole.error).toMatchObject({
      code: 'model_not_served',
      param: 'model',
      type: 'invalid_request_error',
    });
    const missing = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      body: '{"messages": []}',
    });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ error: { code: 'model_required', param: 'model' } });
    const get = await fetch(`${gw.url}/v1/completions`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });
});
