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

  it("answers SGLang's sglang:queue_time_seconds histogram: each request's wait before its first batch", async () => {
    // One running slot (SGLang's --max-running-requests), 50 decode steps of 20 ms per request.
    const s = await start({
      enableMetrics: true,
      servedModelName: 'policy',
      simMaxRunningRequests: 4,
      maxRunningRequests: 1,
      simDecodeUsPerToken: 20_000,
    });
    const before = await (await fetch(`${s.url}/metrics`)).text();
    expect(before).toContain('# TYPE sglang:queue_time_seconds histogram');
    expect(before).toContain('# HELP sglang:queue_time_seconds Histogram of queueing time in seconds.');
    const lbl = 'model_name="policy",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"';
    expect(before).toContain(`sglang:queue_time_seconds_bucket{${lbl},le="+Inf"} 0.0`);
    // SGLang's bounds, in prometheus_client's spelling.
    const les = [...before.matchAll(/^sglang:queue_time_seconds_bucket\{[^}]*le="([^"]+)"\}/gm)].map(
      (m) => m[1],
    );
    expect(les.slice(0, 6)).toEqual(['0.0', '0.1', '0.2', '0.5', '1.0', '2.0']);
    expect(les.slice(-3)).toEqual(['2500.0', '3000.0', '+Inf']);
    const body = { text: 'hello world', sampling_params: { max_new_tokens: 50, ignore_eos: true } };
    await Promise.all([1, 2, 3].map(() => post(s.url, '/generate', body)));
    const after = await (await fetch(`${s.url}/metrics`)).text();
    const bucket = (le: string) =>
      Number(
        new RegExp(
          `^sglang:queue_time_seconds_bucket\\{[^}]*le="${le.replace('+', '\\+')}"\\} (\\S+)$`,
          'm',
        ).exec(after)?.[1],
      );
    expect(sample(after, 'sglang:queue_time_seconds_count')?.value).toBe(3);
    expect(bucket('+Inf')).toBe(3);
    // The second and third waited for one and two whole requests (50 steps of 20 ms each): at least 1 s and 2 s.
    expect(bucket('0.5')).toBeLessThanOrEqual(1);
    expect(bucket('1.0')).toBeLessThanOrEqual(2);
    expect(sample(after, 'sglang:queue_time_seconds_sum')?.value).toBeGreaterThan(2.9);
  });

  it('is not served without --enable-metrics, as SGLang mounts it only then', async () => {
    const s = await start();
    expect((await get(s.url, '/metrics')).status).toBe(404);
  });
});
