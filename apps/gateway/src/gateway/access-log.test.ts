import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { waitFor } from '@uis/sglang-engine/testing';
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

const cutLines: Array<Record<string, unknown>> = [];
const cutSink = new Writable({
  write(chunk: Buffer, _enc, done) {
    for (const l of chunk.toString('utf8').split('\n')) if (l !== '') cutLines.push(JSON.parse(l));
    done();
  },
});
const cut = gatewayOnSims({
  config: singleRolloutConfig(),
  server: {
    adminToken: 'admin-token-access-log-cut',
    accessLog: true,
    bodyTimeoutMs: 1000,
    maxBodyBytes: 4096,
    logger: pino({ level: 'info' }, cutSink),
  },
});

/** Sends `head` and then `body` in pieces on a raw socket; resolves with the status line the gateway answered. */
function rawRequest(url: string, head: string, pieces: readonly string[]): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => {
      socket.write(head);
      for (const p of pieces) socket.write(p);
    });
    let answer = '';
    socket.on('data', (d) => {
      answer += d.toString('latin1');
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(answer.split('\r\n')[0] ?? ''));
  });
}

describe('access log of requests cut before their body ends', { timeout: 60_000 }, () => {
  it('logs a body that did not arrive in time as 408 request_timeout, not 500', async () => {
    const status = await rawRequest(
      cut.url,
      'POST /rollout/generate HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n' +
        'x-request-id: req-slow-body\r\ncontent-length: 100\r\n\r\n',
      ['{"text": "never finished'],
    );
    expect(status).toBe('HTTP/1.1 408 Request Timeout');
    await waitFor(() => cutLines.some((l) => l.request_id === 'req-slow-body'), 10_000);
    const line = cutLines.find((l) => l.access === true && l.request_id === 'req-slow-body');
    expect(line).toMatchObject({ status: 408, outcome: 'error' });
    expect(cutLines.some((l) => l.request_id === 'req-slow-body' && l.msg === 'request failed')).toBe(false);
  });

  it.each([
    ['/rollout/generate', 'transfer-encoding: chunked'],
    ['/rollout/generate', 'content-length: 16384'],
  ])('logs a body over the limit (%s, %s) as 413 body_too_large', async (path, framing) => {
    const big = 'x'.repeat(8192);
    const chunked = framing.startsWith('transfer');
    const id = `req-big-${path.length}-${chunked ? 'c' : 'l'}`;
    const status = await rawRequest(
      cut.url,
      `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
        `x-request-id: ${id}\r\n${framing}\r\n\r\n`,
      chunked
        ? [`${big.length.toString(16)}\r\n${big}\r\n`, `${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`]
        : [big, big],
    );
    expect(status).toBe('HTTP/1.1 413 Payload Too Large');
    await waitFor(() => cutLines.some((l) => l.request_id === id), 10_000);
    const line = cutLines.find((l) => l.access === true && l.request_id === id);
    expect(line).toMatchObject({ status: 413, outcome: 'error' });
  });
});
