import { StreamVersionSpans } from '@uis/routing';
import type { DiscoverySnapshot } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// An engine of a release without weight version spans (SGLang before 0.5.19; 0.5.17 here) says only the version
// of an answer's last token. A request an in-place switch spanned is declared with every version it ran on, in the
// headers and in the body beside weight_version (`uis_weight_versions`), and no output token index: the answer
// does not say where the version changed, and the gateway does not guess it.
const TOKEN = 'admin-token-old-release';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const gw = gatewayOnSims({
  config: singleRolloutConfig(1),
  sim: { simDecodeUsPerToken: 3000, simSglangVersion: '0.5.17' },
  server: { adminToken: TOKEN, healthProbeMs: 0 },
});

/** The parts of an answer the test reads (a /generate answer's meta_info, an OpenAI answer's metadata). */
interface Answer {
  meta_info: Record<string, unknown>;
  metadata: Record<string, unknown>;
  system_fingerprint?: string;
}

async function call(path: string, body: unknown, headers: Record<string, string> = {}) {
  const r = await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return {
    status: r.status,
    json: (await r.json()) as Answer,
    version: r.headers.get('x-uis-weight-version'),
    versions: r.headers.get('x-uis-weight-versions'),
  };
}

describe('weight versions of an engine without spans (SGLang 0.5.17)', { timeout: 120_000 }, () => {
  it('a request spanning a pause_in_place switch names both versions in its headers and body, no change index', async () => {
    const snap = (await (await fetch(`${gw.url}/rollout/engines`)).json()) as DiscoverySnapshot;
    const from = snap.models.policy?.weight_version as string;
    const raw = call('/rollout/generate', {
      text: 'x',
      sampling_params: { max_new_tokens: 150, ignore_eos: true },
    });
    const chat = call('/rollout/v1/chat/completions', {
      model: 'policy',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 150,
      ignore_eos: true,
    });
    // A stream: its chunks say the engine's version as they come, so the client splits it where it changed.
    const streamed = new StreamVersionSpans();
    let chunks = 0;
    const stream = fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      body: JSON.stringify({
        rid: 'old-stream',
        text: 'z',
        stream: true,
        sampling_params: { max_new_tokens: 150, ignore_eos: true },
      }),
    }).then(async (r) => {
      let buf = '';
      for await (const part of r.body as unknown as AsyncIterable<Uint8Array>) {
        buf += Buffer.from(part).toString();
        for (let at = buf.indexOf('\n\n'); at !== -1; at = buf.indexOf('\n\n')) {
          const data = buf.slice(0, at).replace(/^data: /, '');
          buf = buf.slice(at + 2);
          if (data !== '[DONE]') streamed.add(JSON.parse(data));
          chunks++;
        }
      }
    });
    const inFlight = gw.plane.managerOf('rollout').inFlight;
    await expect.poll(() => inFlight.total(), { timeout: 10_000 }).toBe(3);
    await expect.poll(() => chunks, { timeout: 10_000 }).toBeGreaterThan(3);
    const sw = await call(
      '/admin/roles/rollout/models/policy/weights/switch',
      { mode: 'pause_in_place', update: { source: 'disk', model_path: '/ckpt/v2', weight_version: 'v2' } },
      AUTH,
    );
    expect(sw.status).toBe(200);
    const [g, c] = await Promise.all([raw, chat]);
    expect(g.json.meta_info).toMatchObject({ weight_version: 'v2', uis_weight_versions: [from, 'v2'] });
    expect(g.json.meta_info.weight_versions).toBeUndefined();
    expect(c.json.metadata).toEqual({ weight_version: 'v2', uis_weight_versions: [from, 'v2'] });
    expect(c.json.system_fingerprint).toBe('v2');
    for (const a of [g, c]) {
      expect(a.version).toBe('v2');
      expect(a.versions).toBe(`${from},v2`);
    }
    await stream;
    const engine = ((await (await fetch(`${gw.url}/rollout/engines`)).json()) as DiscoverySnapshot).models
      .policy?.engines[0]?.engine_id as string;
    const runs = gw.launcher.serversOf(engine)[0]?.tokenVersions('old-stream') ?? [];
    expect(runs.map(([, v]) => v)).toEqual([from, 'v2']);
    expect(streamed.spans).toEqual(
      runs.map(([start, version], k) => ({ version, start, end: runs[k + 1]?.[0] ?? 150 })),
    );
    // A request on one version is left as the engine sent it.
    const plain = await call('/rollout/generate', { text: 'y', sampling_params: { max_new_tokens: 3 } });
    expect(plain.json.meta_info.uis_weight_versions).toBeUndefined();
    expect(plain.versions).toBeNull();
  });
});
