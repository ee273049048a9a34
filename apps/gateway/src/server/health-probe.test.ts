import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { HealthSample } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { HealthProbe } from './health-probe.ts';

describe('HealthProbe', () => {
  it('records ok, a 5xx and an unreachable replica, each with its reason', async () => {
    const server = createServer((req, res) => {
      res.statusCode = req.url === '/bad/health' ? 503 : 200;
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const dead = createServer();
    await new Promise<void>((r) => dead.listen(0, '127.0.0.1', () => r()));
    const deadUrl = `http://127.0.0.1:${(dead.address() as AddressInfo).port}`;
    await new Promise<void>((r) => dead.close(() => r()));
    const got = new Map<string, HealthSample>();
    const probe = new HealthProbe({
      targets: () => [
        { engineId: 'ok', baseUrl: base },
        { engineId: 'bad', baseUrl: `${base}/bad` },
        { engineId: 'dead', baseUrl: deadUrl },
      ],
      record: (id, s) => got.set(id, s),
      timeoutMs: 2000,
    });
    try {
      await probe.round();
    } finally {
      probe.stop();
      await new Promise<void>((r) => server.close(() => r()));
    }
    expect(got.get('ok')).toMatchObject({ ok: true, error: null });
    expect(got.get('bad')).toMatchObject({ ok: false, error: 'health answered 503' });
    expect(got.get('dead')).toMatchObject({ ok: false, latency_ms: null });
    expect(got.get('dead')?.error).toEqual(expect.any(String));
  });
});
