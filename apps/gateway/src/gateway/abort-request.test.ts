import { GenerateResponseSchema } from '@uis/sglang-engine';
import { waitFor } from '@uis/sglang-engine/testing';
import { ErrorBodySchema } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';

const ADMIN = 'admin-token-for-abort-tests';
/** 20 ms per decode step: a long generation is still running when the abort lands, even on a loaded machine. */
const gw = gatewayOnSims({
  config: splitTestConfig(),
  sim: { simDecodeUsPerToken: 20_000 },
  server: { adminToken: ADMIN },
});

const long = (extra: Record<string, unknown> = {}) => ({
  input_ids: [5, 6, 7],
  sampling_params: { max_new_tokens: 10_000, ignore_eos: true },
  ...extra,
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
}

/** The SSE events of a streamed answer, read as they come; `first` resolves with the first event. */
function stream(path: string, body: unknown) {
  let seen!: (event: string) => void;
  const first = new Promise<string>((r) => {
    seen = r;
  });
  const all = fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  }).then(async (r) => {
    const events: string[] = [];
    let buffered = '';
    const decoder = new TextDecoder();
    for await (const chunk of r.body as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let at = buffered.indexOf('\n\n'); at !== -1; at = buffered.indexOf('\n\n')) {
        const event = buffered.slice(0, at).replace(/^data: /, '');
        buffered = buffered.slice(at + 2);
        events.push(event);
        seen(event);
      }
    }
    return events;
  });
  return { first, all };
}

const manager = () => gw.plane.managerOf('rollout');

/** Waits until the replica holding `rid` runs it and has made two decode steps since (it has output to lose). */
async function runningAt(rid: string): Promise<string> {
  const engineId = await waitFor(() => manager().requests.get(rid)?.engineId);
  if (engineId === null) throw new Error(`${rid} went to a router`);
  const stats = () => gw.launcher.serversOf(engineId)[0]?.stats();
  const steps = await waitFor(() => ((stats()?.running ?? 0) > 0 ? stats()?.steps : undefined));
  await waitFor(() => (stats()?.steps ?? 0) >= steps + 2);
  return engineId;
}

const codeOf = (json: unknown) => ErrorBodySchema.parse(json).error;

describe('abort_request through the gateway', { timeout: 60_000 }, () => {
  it('aborts a rid at the replica that holds it; the caller gets its partial output in SGLang’s shape', async () => {
    const caller = post('/rollout/generate', long({ rid: 'plain-1', model: 'policy' }));
    const engineId = await runningAt('plain-1');
    const aborted = await post('/rollout/abort_request', { rid: 'plain-1' });
    expect(aborted.status).toBe(200);
    expect(aborted.json()).toEqual({
      aborted: [{ rid: 'plain-1', model: 'policy', engine_id: engineId }],
      engines: [engineId],
    });
    const answer = await caller;
    expect(answer.status).toBe(200);
    const out = GenerateResponseSchema.parse(answer.json());
    expect(out.meta_info.finish_reason).toEqual({
      type: 'abort',
      message: 'Aborted',
      status_code: null,
      err_type: null,
    });
    expect(out.meta_info.id).toBe('plain-1');
    expect(out.output_ids?.length).toBeGreaterThan(0);
    expect(out.meta_info.completion_tokens).toBe(out.output_ids?.length);
    // Ended: the gateway holds the rid no more, and a second abort says so.
    await waitFor(() => manager().requests.get('plain-1') === undefined);
    const again = await post('/rollout/abort_request', { rid: 'plain-1' });
    expect(again.status).toBe(404);
    expect(codeOf(again.json())).toMatchObject({ code: 'unknown_rid', path: 'rid' });
  });

  it('a streamed request without a rid: the gateway’s rid (meta_info.id) aborts it, final chunk then [DONE]', async () => {
    const s = stream('/rollout/generate', long({ stream: true, model: 'policy' }));
    const rid = GenerateResponseSchema.parse(JSON.parse(await s.first)).meta_info.id;
    await runningAt(rid);
    expect((await post('/rollout/abort_request', { rid })).status).toBe(200);
    const events = await s.all;
    expect(events.at(-1)).toBe('[DONE]');
    const last = GenerateResponseSchema.parse(JSON.parse(events.at(-2) as string));
    expect(last.meta_info.finish_reason?.type).toBe('abort');
    expect(last.meta_info.id).toBe(rid);
    expect(last.output_ids?.length).toBe(last.meta_info.completion_tokens);
  });

  it('an OpenAI chat completion answers finish_reason abort with the text so far', async () => {
    const caller = post('/rollout/v1/chat/completions', {
      model: 'policy',
      rid: 'chat-1',
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: 10_000,
      ignore_eos: true,
    });
    await runningAt('chat-1');
    expect((await post('/rollout/abort_request', { rid: 'chat-1' })).status).toBe(200);
    const answer = (await caller).json() as {
      choices: Array<{ finish_reason: string; message: { content: string } }>;
      usage: { completion_tokens: number };
    };
    expect(answer.choices[0]?.finish_reason).toBe('abort');
    expect(answer.choices[0]?.message.content.length).toBeGreaterThan(0);
    expect(answer.usage.completion_tokens).toBeGreaterThan(0);
  });

  it('abort_all of one model ends its requests on every replica and leaves the other model’s running', async () => {
    const a = post('/rollout/generate', long({ rid: 'all-a', model: 'policy' }));
    const b = post('/rollout/generate', long({ rid: 'all-b', model: 'policy' }));
    const other = post('/rollout/generate', long({ rid: 'all-c', model: 'policy-code' }));
    await runningAt('all-a');
    await runningAt('all-b');
    const otherEngine = await runningAt('all-c');
    const answer = await post('/rollout/abort_request', { abort_all: true, model: 'policy' });
    expect(answer.status).toBe(200);
    const result = answer.json() as { aborted: Array<{ rid: string }>; engines: string[] };
    expect(result.aborted.map((r) => r.rid).sort()).toEqual(['all-a', 'all-b']);
    expect(result.engines).toEqual(
      manager()
        .eligibleEngines('policy')
        .map((e) => e.engineId)
        .sort(),
    );
    for (const r of [await a, await b])
      expect(GenerateResponseSchema.parse(r.json()).meta_info.finish_reason?.type).toBe('abort');
    expect(gw.launcher.serversOf(otherEngine)[0]?.stats().running).toBe(1);
    // The admin door of the same operation (the command table's abort_request) takes the admin token.
    const refused = await post('/admin/roles/rollout/abort_request', { rid: 'all-c' });
    expect(refused.status).toBe(401);
    const viaAdmin = await post(
      '/admin/roles/rollout/abort_request',
      { rid: 'all-c' },
      { authorization: `Bearer ${ADMIN}` },
    );
    expect(viaAdmin.status).toBe(200);
    expect(viaAdmin.json()).toMatchObject({
      ok: true,
      result: { aborted: [{ rid: 'all-c', model: 'policy-code' }] },
    });
    expect(GenerateResponseSchema.parse((await other).json()).meta_info.finish_reason?.type).toBe('abort');
  });

  it('refuses bad bodies with a code and the path, and counts aborts by reason in the metrics', async () => {
    for (const [body, code, path] of [
      ['{"rid":', 'invalid_json', 'body'],
      [{}, 'invalid_body', 'body.abort_all'],
      [{ rid: 'x', abort_all: true }, 'invalid_body', 'body.rid'],
      [{ rid: 7 }, 'invalid_body', 'body.rid'],
      [{ rid: 'x', model: 'policy' }, 'invalid_body', 'body.model'],
      [{ abort_all: true, model: 'nope' }, 'unknown_model', 'model'],
    ] as const) {
      const r = await post('/rollout/abort_request', body);
      expect([JSON.stringify(body), codeOf(r.json())]).toEqual([
        JSON.stringify(body),
        expect.objectContaining({ code, path }),
      ]);
    }
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const line = (reason: string, model = 'policy') =>
      metrics
        .split('\n')
        .find((l) =>
          l.startsWith(`uis_aborted_requests_total{role="rollout",model="${model}",reason="${reason}"}`),
        );
    expect(line('abort_request')).toMatch(/ 3$/);
    expect(line('abort_all')).toMatch(/ 2$/);
    expect(line('abort_request', 'policy-code')).toMatch(/ 1$/);
  });

  it('an abort that reaches the engine before the request is registered there is sent again until it lands', async () => {
    const servers = manager()
      .eligibleEngines('policy')
      .flatMap((e) => gw.launcher.serversOf(e.engineId));
    for (const s of servers) s.arrivals.hold();
    try {
      const caller = post(
        '/rollout/generate',
        long({ rid: 'early-1', model: 'policy', sampling_params: { max_new_tokens: 500, ignore_eos: true } }),
      );
      // The race: the gateway forwarded the request (it holds the rid) and the engine has it, but has not
      // registered its rid, so SGLang drops an abort of it.
      await waitFor(
        () =>
          manager().requests.get('early-1') !== undefined && servers.some((s) => s.arrivals.waiting === 1),
      );
      expect((await post('/rollout/abort_request', { rid: 'early-1' })).status).toBe(200);
      for (const s of servers) s.arrivals.release();
      // Without the re-sends the request would run its 500 tokens and end with finish_reason length.
      const out = GenerateResponseSchema.parse((await caller).json());
      expect(out.meta_info.finish_reason?.type).toBe('abort');
      expect(out.meta_info.completion_tokens).toBeLessThan(500);
      await waitFor(() => manager().requests.resending === 0);
    } finally {
      for (const s of servers) s.arrivals.release();
    }
  });
});
