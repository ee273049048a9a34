import { waitFor } from '@uis/sglang-engine/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type SimServer, startSimServer } from './server.ts';

const servers: SimServer[] = [];
afterEach(async () => {
  await Promise.allSettled(servers.splice(0).map((s) => s.close()));
});

describe('PD bootstrap port', () => {
  it('a prefill head binds its bootstrap port and answers /health there; decode and regular engines bind none', async () => {
    const prefill = await startSimServer({ disaggregationMode: 'prefill' });
    servers.push(prefill);
    expect(prefill.bootstrapPort).toBeGreaterThan(0);
    const health = await fetch(`http://127.0.0.1:${prefill.bootstrapPort}/health`);
    expect(health.status).toBe(200);
    const decode = await startSimServer({ disaggregationMode: 'decode' });
    const regular = await startSimServer();
    servers.push(decode, regular);
    expect([decode.bootstrapPort, regular.bootstrapPort]).toEqual([null, null]);
  });

  it('a second prefill engine on a bootstrap port in use fails to start, naming the flag, and leaves nothing bound', async () => {
    const first = await startSimServer({ disaggregationMode: 'prefill' });
    servers.push(first);
    const err = await startSimServer({
      disaggregationMode: 'prefill',
      disaggregationBootstrapPort: first.bootstrapPort as number,
    }).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/--disaggregation-bootstrap-port \d+: .*EADDRINUSE/);
    // The first one keeps serving; closing it frees its bootstrap port.
    expect((await fetch(`${first.url}/health`)).status).toBe(200);
    const port = first.bootstrapPort as number;
    await first.close();
    servers.length = 0;
    const again = await startSimServer({ disaggregationMode: 'prefill', disaggregationBootstrapPort: port });
    servers.push(again);
    expect(again.bootstrapPort).toBe(port);
  });
  it('a prefill engine whose scheduler dies lets go of its bootstrap port with its HTTP port', {
    timeout: 20_000,
  }, async () => {
    const prefill = await startSimServer({ disaggregationMode: 'prefill', simCrashAfter: 0 });
    servers.push(prefill);
    await prefill.ready;
    const port = prefill.bootstrapPort as number;
    await fetch(`${prefill.url}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'x', sampling_params: { max_new_tokens: 4 } }),
    }).then(
      (r) => r.text(),
      () => undefined,
    );
    // As a real SGLang process that died: a relaunch on the same port binds it.
    const again = await waitFor(
      () =>
        startSimServer({ disaggregationMode: 'prefill', disaggregationBootstrapPort: port }).catch(
          () => undefined,
        ),
      10_000,
      `a relaunch binding bootstrap port ${port}`,
    );
    servers.push(again);
    expect(again.bootstrapPort).toBe(port);
  });
});
