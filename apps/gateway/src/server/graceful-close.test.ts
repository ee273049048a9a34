import { type ControlPlane, createControlPlane, InProcessSimLauncher } from '@uis/control-plane';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { singleRolloutConfig } from '../testing/fixtures.ts';
import { UisServer } from './uis-server.ts';

const launcher = new InProcessSimLauncher({ simDecodeUsPerToken: 1000 });
let plane: ControlPlane;

beforeAll(async () => {
  plane = await createControlPlane({ config: singleRolloutConfig(), launcher });
}, 60_000);

afterAll(async () => {
  await plane?.stop();
  await launcher.closeAll();
});

async function openStream(url: string) {
  const r = await fetch(`${url}/rollout/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify({
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 800,
      ignore_eos: true,
      stream: true,
    }),
  });
  const reader = r.body!.getReader();
  await reader.read();
  return async () => {
    let text = '';
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value);
    }
  };
}

describe('UisServer.close', { timeout: 60_000 }, () => {
  it('lets a relayed stream finish within the grace period and refuses new connections meanwhile', async () => {
    const server = new UisServer({ plane, adminToken: 'close-admin-token', healthProbeMs: 0 });
    const { url } = await server.listen(0);
    const rest = await openStream(url);
    expect(server.inFlight()).toBe(1);
    const closing = server.close({ graceMs: 30_000 });
    await expect(fetch(`${url}/rollout/health`)).rejects.toThrow();
    const text = await rest();
    expect(text).toContain('data: [DONE]');
    await closing;
    expect(server.inFlight()).toBe(0);
  });

  it('cuts relayed streams without a grace period', async () => {
    const server = new UisServer({ plane, adminToken: 'close-admin-token', healthProbeMs: 0 });
    const { url } = await server.listen(0);
    const rest = await openStream(url);
    await server.close();
    const outcome = await rest().then(
      (text) => (text.includes('[DONE]') ? 'complete' : 'cut'),
      () => 'cut',
    );
    expect(outcome).toBe('cut');
  });
});
