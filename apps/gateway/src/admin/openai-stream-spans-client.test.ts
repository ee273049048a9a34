import { StreamVersionSpans, sseData } from '@uis/routing';
import type { DiscoverySnapshot } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// The TypeScript client's reading of an OpenAI stream through the gateway (`StreamVersionSpans` fed every event to
// the stream's end): a pause_in_place switch while the engine stands at a known output token (the simulator's break
// point), and the spans the client derives must be the simulator's own record. No sleeps: every wait is a condition.
const TOKEN = 'admin-token-openai-client-spans';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const AT = 5;
const N = 30;

describe("a client's spans of an OpenAI stream across a switch (SGLang 0.5.23)", { timeout: 120_000 }, () => {
  const gw = gatewayOnSims({
    config: singleRolloutConfig(1),
    sim: { simDecodeUsPerToken: 1000, simSglangVersion: '0.5.23' },
    server: { adminToken: TOKEN, healthProbeMs: 0 },
  });

  async function stream(path: string, body: Record<string, unknown>) {
    const res = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'policy', stream: true, ignore_eos: true, ...body }),
    });
    expect(res.status).toBe(200);
    return res;
  }

  // Chat as the OpenAI SDKs send it (no token counts: only the event after [DONE] gives the index); completions
  // with continuous usage (its chunks' counts split it even for a reader that stops at [DONE]).
  it.each([
    ['chat', '/rollout/v1/chat/completions', { messages: [{ role: 'user', content: 'a' }] }, false],
    [
      'completions',
      '/rollout/v1/completions',
      { prompt: 'b', stream_options: { continuous_usage_stats: true } },
      true,
    ],
  ])('%s: split at the token the engine stood at', async (kind, path, prompt, counted) => {
    const snap = (await (await fetch(`${gw.url}/rollout/engines`)).json()) as DiscoverySnapshot;
    const from = snap.models.policy?.weight_version as string;
    const sim = gw.launcher.serversOf(snap.models.policy?.engines[0]?.engine_id as string)[0];
    if (sim === undefined) throw new Error('no simulator');
    const rid = `client-${kind}`;
    const to = `${kind}-v2`;
    const stopped = sim.steps.breakAt(rid, AT);
    const res = await stream(path, { rid, max_tokens: N, ...prompt });
    const spans = new StreamVersionSpans();
    const upToDone = new StreamVersionSpans();
    let done = false;
    const read = (async () => {
      for await (const data of sseData(res.body as ReadableStream<Uint8Array>)) {
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        spans.add(JSON.parse(data));
        if (!done) upToDone.add(JSON.parse(data));
      }
    })();
    await stopped;
    const sw = await fetch(`${gw.url}/admin/roles/rollout/models/policy/weights/switch`, {
      method: 'POST',
      headers: AUTH,
      body: JSON.stringify({
        mode: 'pause_in_place',
        update: { source: 'disk', model_path: `/ckpt/${to}`, weight_version: to },
      }),
    });
    sim.steps.unbreak();
    expect(sw.status).toBe(200);
    await read;

    const truth = (sim.tokenVersions(rid) ?? []).map(([start, version], k, runs) => ({
      version,
      start,
      end: runs[k + 1]?.[0] ?? N,
    }));
    expect(truth).toEqual([
      { version: from, start: 0, end: AT },
      { version: to, start: AT, end: N },
    ]);
    expect(spans.spans).toEqual(truth);
    // A reader stopping at [DONE] has the chunks' fingerprints: without counts they change version but give no
    // token index, so it must say unknown rather than guess.
    expect(upToDone.spans).toEqual(counted ? truth : [{ version: null, start: 0, end: N }]);

    // On one version: no event, the fingerprints give the version of every token.
    const plain = new StreamVersionSpans();
    const one = await stream(path, { max_tokens: 4, ...prompt });
    for await (const data of sseData(one.body as ReadableStream<Uint8Array>))
      if (data !== '[DONE]') plain.add(JSON.parse(data));
    expect(plain.spans).toEqual([{ version: to, start: 0, end: 4 }]);
  });
});
