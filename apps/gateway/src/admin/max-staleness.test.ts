import type { DiscoverySnapshot } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// max_staleness 1: a request in flight is aborted with its partial output once the newest version is more than one
// version past the one it started on (here: two pause_in_place switches under it), counted under max_staleness; a
// request one version behind keeps running. Discovery shows the bound.
const TOKEN = 'admin-token-staleness';
const AUTH = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
const gw = gatewayOnSims({
  config: singleRolloutConfig(1, { max_staleness: 1 }),
  sim: { simDecodeUsPerToken: 3000 },
  server: { adminToken: TOKEN, healthProbeMs: 0 },
});

interface Chunk {
  output_ids: number[];
  meta_info: {
    finish_reason: { type: string } | null;
    weight_version: string;
    weight_versions?: Array<{ version: string; start: number; end: number }>;
  };
}

async function switchTo(version: string): Promise<void> {
  const r = await fetch(`${gw.url}/admin/roles/rollout/models/policy/weights/switch`, {
    method: 'POST',
    headers: AUTH,
    body: JSON.stringify({
      mode: 'pause_in_place',
      update: { source: 'disk', model_path: `/ckpt/${version}`, weight_version: version },
    }),
  });
  expect(r.status).toBe(200);
}

/** A streamed /generate: its chunks as they come (`events`), and `done` once the stream ends. */
function stream(tokens: number) {
  const events: Chunk[] = [];
  const done = fetch(`${gw.url}/rollout/generate`, {
    method: 'POST',
    body: JSON.stringify({
      text: 'x',
      stream: true,
      sampling_params: { max_new_tokens: tokens, ignore_eos: true },
    }),
  }).then(async (r) => {
    const decoder = new TextDecoder();
    let buf = '';
    for await (const part of r.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(part, { stream: true });
      let at = buf.indexOf('\n\n');
      while (at !== -1) {
        const data = buf.slice(0, at).replace(/^data: /, '');
        buf = buf.slice(at + 2);
        if (data !== '[DONE]') events.push(JSON.parse(data) as Chunk);
        at = buf.indexOf('\n\n');
      }
    }
    return events;
  });
  return { events, done };
}

describe('max_staleness', { timeout: 120_000 }, () => {
  it('aborts a request in flight more than max_staleness versions behind the newest, keeps one within it', async () => {
    const snap = (await (await fetch(`${gw.url}/rollout/engines`)).json()) as DiscoverySnapshot;
    expect(snap.models.policy?.max_staleness).toBe(1);
    const from = snap.models.policy?.weight_version as string;
    const old = stream(3000);
    await expect.poll(() => old.events.length, { timeout: 10_000 }).toBeGreaterThan(3);
    await switchTo('v1');
    const recent = stream(3000);
    await expect.poll(() => recent.events.length, { timeout: 10_000 }).toBeGreaterThan(3);
    // The old request is now one version behind (within the bound): still running.
    expect(old.events[old.events.length - 1]?.meta_info.finish_reason).toBeNull();
    await switchTo('v2');
    const cut = (await old.done).at(-1)!;
    expect(cut.meta_info.finish_reason?.type).toBe('abort');
    expect(cut.output_ids.length).toBeLessThan(3000);
    expect(cut.meta_info.weight_versions?.[0]).toMatchObject({ version: from, start: 0 });
    expect(cut.meta_info.weight_versions?.map((s) => s.version)).toContain('v1');
    // The recent request (started on v1, one behind v2) was not aborted: abort it ourselves to end the test.
    expect(recent.events.at(-1)?.meta_info.finish_reason).toBeNull();
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const line = metrics
      .split('\n')
      .find((l) =>
        l.startsWith('uis_aborted_requests_total{role="rollout",model="policy",reason="max_staleness"}'),
      );
    expect(line).toMatch(/ 1$/);
    const all = await fetch(`${gw.url}/rollout/abort_request`, {
      method: 'POST',
      body: JSON.stringify({ abort_all: true }),
    });
    expect(all.status).toBe(200);
    const ended = (await recent.done).at(-1)!;
    expect(ended.meta_info.weight_versions?.[0]).toMatchObject({ version: 'v1', start: 0 });
  });
});
