import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

const lines: Array<Record<string, unknown>> = [];
const sink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l));
    done();
  },
});
const gw = gatewayOnSims({
  config: singleRolloutConfig(),
  server: { adminToken: 'admin-token-access-log', accessLog: true, logger: pino({ level: 'info' }, sink) },
});

describe('access log', { timeout: 60_000 }, () => {
  it('writes one line per request with role, model, replica, status, latency, tokens and request id', async () => {
    const r = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'req-access-1' },
      body: JSON.stringify({ text: 'log me', sampling_params: { max_new_tokens: 3 } }),
    });
    const meta = ((await r.json()) as { meta_info: { prompt_tokens: number; completion_tokens: number } })
      .meta_info;
    const refused = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'req-access-2' },
      body: JSON.stringify({ model: 'nope', text: 'x' }),
    });
    expect(refused.status).toBe(400);
    const access = lines.filter((l) => l.access === true);
    expect(access).toHaveLength(2);
    expect(access[0]).toMatchObject({
      msg: 'access',
      request_id: 'req-access-1',
      role: 'rollout',
      model: 'policy',
      replica: 'policy/0',
      status: 200,
      prompt_tokens: meta.prompt_tokens,
      completion_tokens: meta.completion_tokens,
      ttft_ms: null,
      outcome: 'ok',
    });
    expect(access[0]?.latency_ms).toEqual(expect.any(Number));
    expect(access[1]).toMatchObject({
      request_id: 'req-access-2',
      status: 400,
      replica: null,
      prompt_tokens: null,
    });
  });
});
