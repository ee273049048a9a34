import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

const ADMIN = 'admin-token-for-metrics-tests';
const gw = gatewayOnSims({ config: singleRolloutConfig(), server: { adminToken: ADMIN } });

async function scrape(): Promise<string> {
  return fetch(`${gw.url}/metrics`).then((r) => r.text());
}

/** A sample's value in the exposition text (0 when the series is absent). */
function sample(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const POLICY = 'role="rollout",model="policy"';

async function tokens(): Promise<{ prompt: number; generation: number; ttft: number; requests: number }> {
  const t = await scrape();
  return {
    prompt: sample(t, 'uis_prompt_tokens_total', POLICY),
    generation: sample(t, 'uis_generation_tokens_total', POLICY),
    ttft: sample(t, 'uis_time_to_first_token_seconds_count', POLICY),
    requests: sample(t, 'uis_request_duration_seconds_count', POLICY),
  };
}

function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** The data events of an SSE body, parsed. */
function events(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n\n')
    .map((e) => e.replace(/^data: /, '').trim())
    .filter((e) => e !== '' && e !== '[DONE]')
    .map((e) => JSON.parse(e) as Record<string, unknown>);
}

describe('serving metrics through the gateway', { timeout: 60_000 }, () => {
  it('moves the token counters by the counts /generate reported, and records no TTFT for a whole answer', async () => {
    const before = await tokens();
    const r = await post('/rollout/generate', {
      text: 'count my tokens',
      sampling_params: { max_new_tokens: 7 },
    });
    const body = (await r.json()) as { meta_info: { prompt_tokens: number; completion_tokens: number } };
    expect(body.meta_info.completion_tokens).toBeGreaterThan(0);
    const after = await tokens();
    expect(after.prompt - before.prompt).toBe(body.meta_info.prompt_tokens);
    expect(after.generation - before.generation).toBe(body.meta_info.completion_tokens);
    expect(after.requests - before.requests).toBe(1);
    expect(after.ttft).toBe(before.ttft);
  });

  it('counts a streamed /generate by its last cumulative meta_info and records its TTFT', async () => {
    const before = await tokens();
    const r = await post('/rollout/generate', {
      text: 'stream my tokens please',
      stream: true,
      sampling_params: { max_new_tokens: 12 },
    });
    const last = events(await r.text()).at(-1) as {
      meta_info: { prompt_tokens: number; completion_tokens: number };
    };
    const after = await tokens();
    expect(after.prompt - before.prompt).toBe(last.meta_info.prompt_tokens);
    expect(after.generation - before.generation).toBe(last.meta_info.completion_tokens);
    expect(after.ttft - before.ttft).toBe(1);
  });

  it('counts chat usage, streamed with include_usage too', async () => {
    let before = await tokens();
    const whole = await post('/rollout/v1/chat/completions', {
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 5,
    });
    const usage = ((await whole.json()) as { usage: { prompt_tokens: number; completion_tokens: number } })
      .usage;
    let after = await tokens();
    expect(after.prompt - before.prompt).toBe(usage.prompt_tokens);
    expect(after.generation - before.generation).toBe(usage.completion_tokens);

    before = after;
    const streamed = await post('/rollout/v1/chat/completions', {
      messages: [{ role: 'user', content: 'stream with usage' }],
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    const u = (
      events(await streamed.text()).at(-1) as { usage: { prompt_tokens: number; completion_tokens: number } }
    ).usage;
    after = await tokens();
    expect(after.prompt - before.prompt).toBe(u.prompt_tokens);
    expect(after.generation - before.generation).toBe(u.completion_tokens);
    expect(after.ttft - before.ttft).toBe(1);
  });

  it('reports each replica weight version and its lag, and process metrics with event-loop lag', async () => {
    const t = await scrape();
    expect(t).toMatch(
      /uis_replica_weight_version_info\{role="rollout",model="policy",engine_id="policy\/0",weight_version="[^"]*"\} 1/,
    );
    expect(
      sample(t, 'uis_replica_weight_versions_behind', 'role="rollout",model="policy",engine_id="policy/0"'),
    ).toBe(0);
    expect(t).toMatch(/^nodejs_eventloop_lag_seconds \d/m);
    expect(t).toMatch(/^process_cpu_seconds_total \d/m);
  });

  it('counts upstream errors by kind and retries by reason when the engine is gone', async () => {
    await gw.launcher.serversOf('policy/0')[0]?.close();
    const r = await post('/rollout/generate', {
      text: 'nobody home',
      sampling_params: { max_new_tokens: 1 },
    });
    expect(r.status).toBe(502);
    const t = await scrape();
    expect(sample(t, 'uis_upstream_errors_total', `${POLICY},kind="engine_unreachable"`)).toBe(1);
    // One replica: nothing else to retry on.
    expect(t).not.toMatch(/uis_upstream_retries_total\{/);
  });
});
