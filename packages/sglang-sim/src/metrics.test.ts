import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { get, post, simsPerTest } from './testing.ts';

const { start } = simsPerTest();

/** `name{labels} value` of one sample of the text exposition. */
function sample(text: string, name: string): { labels: string; value: number } | undefined {
  const m = new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, 'm').exec(text);
  return m ? { labels: m[1] as string, value: Number(m[2]) } : undefined;
}

describe('GET /metrics (--enable-metrics)', () => {
  it("answers SGLang's scheduler gauges with SGLang's names and labels: running, queued, KV token usage", async () => {
    // One running slot: the second and third requests wait in the queue.
    const s = await start({
      enableMetrics: true,
      servedModelName: 'policy',
      simMaxRunningRequests: 1,
      simDecodeUsPerToken: 20_000,
      simKvCapacityTokens: 1000,
    });
    const idle = await fetch(`${s.url}/metrics`);
    expect(idle.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await idle.text();
    expect(text).toContain('# TYPE sglang:num_queue_reqs gauge');
    expect(sample(text, 'sglang:num_running_reqs')).toEqual({
      labels: 'model_name="policy",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"',
      value: 0,
    });
    expect(sample(text, 'sglang:max_total_num_tokens')?.value).toBe(1000);
    const body = { text: 'hello world', sampling_params: { max_new_tokens: 50, ignore_eos: true } };
    const busy = Promise.all([1, 2, 3].map(() => post(s.url, '/generate', body)));
    const during = await waitFor(async () => {
      const t = await (await fetch(`${s.url}/metrics`)).text();
      return sample(t, 'sglang:num_queue_reqs')?.value === 2 ? t : undefined;
    }, 10_000);
    expect(sample(during, 'sglang:num_running_reqs')?.value).toBe(1);
    const usage = sample(during, 'sglang:token_usage')?.value ?? 0;
    expect(usage).toBeGreaterThan(0);
    expect(usage).toBeCloseTo((sample(during, 'sglang:num_used_tokens')?.value ?? 0) / 1000, 6);
    await busy;
  });

  it('is not served without --enable-metrics, as SGLang mounts it only then', async () => {
    const s = await start();
    expect((await get(s.url, '/metrics')).status).toBe(404);
  });
});
