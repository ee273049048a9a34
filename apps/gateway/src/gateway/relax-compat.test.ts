import { execFileSync } from 'node:child_process';
import { layoutRole } from '@uis/manager/testing';
import { DiscoverySnapshotSchema, parseConfig } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims } from '../testing/fixtures.ts';

/** What Relax's own callers see against a live gateway: keyed requests land where Relax's Python resolver sends
 * them (checked against Python in the test), and every proxied answer names the replica and weight version that
 * produced it. */
const config = parseConfig({
  cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
  roles: {
    rollout: layoutRole(
      'decoupled',
      {
        name: 'policy',
        weight_source: 'disk',
        engine_groups: [{ num_gpus: 6, gpus_per_engine: 1, tp: 1 }],
      },
      { routing: { default_model: 'policy', policy: 'least_outstanding' } },
    ),
    genrm: layoutRole('decoupled', {
      name: 'judge',
      weight_source: 'static',
      engine_groups: [{ num_gpus: 2, gpus_per_engine: 1, tp: 1 }],
    }),
  },
});
const gw = gatewayOnSims({
  config,
  sim: { simDecodeUsPerToken: 200 },
  server: { adminToken: 'relax-compat-admin' },
});

/** Relax's resolver rule in Python, run on the test's inputs. */
const PYTHON_PICKS = `
import hashlib, json, sys
c = json.load(sys.stdin)
def pick(key):
    digest = lambda e: hashlib.sha256(json.dumps([c["role"], c["model"], key, e], separators=(",", ":")).encode()).digest()
    return max(c["engines"], key=digest)
json.dump([pick(k) for k in c["keys"]], sys.stdout)
`;
function pythonPicks(role: string, model: string, keys: string[], engines: string[]): string[] {
  const out = execFileSync('python3', ['-c', PYTHON_PICKS], {
    input: JSON.stringify({ role, model, keys, engines }),
    encoding: 'utf8',
  });
  return JSON.parse(out) as string[];
}

async function snapshot(role: string) {
  const r = await fetch(`${gw.url}/${role}/engines`);
  return DiscoverySnapshotSchema.parse(await r.json());
}

describe('Relax compatibility over HTTP', { timeout: 60_000 }, () => {
  it('routes a keyed request (X-SMG-Routing-Key) to the replica Relax picks, whatever the policy', async () => {
    const snap = await snapshot('rollout');
    const engines = snap.models.policy!.engines.map((e) => e.engine_id);
    expect(engines).toHaveLength(6);
    // Header values are latin-1 on the wire; Node and Starlette both decode them so, hence 'naïve café'.
    const keys = ['conversation-17', 'grpo-group-3', 'naïve café', 'k', 'session/42'];
    const expected = pythonPicks('rollout', 'policy', keys, engines);
    const served: string[] = [];
    for (const key of keys) {
      for (let repeat = 0; repeat < 2; repeat++) {
        const r = await fetch(`${gw.url}/rollout/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'X-SMG-Routing-Key': key },
          body: JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 2 } }),
        });
        expect(r.status).toBe(200);
        await r.text();
        if (repeat === 1) served.push(r.headers.get('x-uis-engine-id') ?? '');
      }
    }
    expect(served).toEqual(expected);
    expect(new Set(served).size).toBeGreaterThan(1);
  });

  it('names the serving replica and its weight version on every proxied answer, streamed or not', async () => {
    const snap = await snapshot('rollout');
    const versions = new Map(snap.models.policy!.engines.map((e) => [e.engine_id, e.weight_version ?? null]));
    const answers = [
      await fetch(`${gw.url}/rollout/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hello', sampling_params: { max_new_tokens: 2 } }),
      }),
      await fetch(`${gw.url}/rollout/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true }),
      }),
      await fetch(`${gw.url}/genrm/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'score this', sampling_params: { max_new_tokens: 2 } }),
      }),
    ];
    for (const r of answers) {
      await r.text();
      expect(r.status).toBe(200);
      const id = r.headers.get('x-uis-engine-id');
      expect(id).toMatch(/^(policy|judge)\/\d$/);
      if (id?.startsWith('policy/')) {
        const version = versions.get(id);
        expect(version).not.toBeNull();
        expect(r.headers.get('x-uis-weight-version')).toBe(version);
      }
    }
  });

  it("answers Relax's GenRM health readers by default, and both legacy spellings", async () => {
    const health = (await (await fetch(`${gw.url}/genrm/health`)).json()) as {
      models: Record<string, unknown>;
    };
    expect(health).toMatchObject({ status: 'healthy', service: 'genrm', role: 'genrm', can_serve: true });
    expect(health.models.judge).toMatchObject({ state: 'ready', can_serve: true });
    for (const q of ['schema=1', 'schema_version=1']) {
      expect(await (await fetch(`${gw.url}/genrm/health?${q}`)).json()).toEqual({
        status: 'healthy',
        service: 'genrm',
      });
    }
    const bySchema = (await (await fetch(`${gw.url}/rollout/engines?schema=1`)).json()) as {
      total_engines: number;
    };
    const byVersion = await (await fetch(`${gw.url}/rollout/engines?schema_version=1`)).json();
    expect(byVersion).toEqual(bySchema);
    expect(bySchema.total_engines).toBe(6);
  });

  it('puts the message where FastAPI callers read it: "detail" beside "error"', async () => {
    const r = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'no-such-model', text: 'x' }),
    });
    const body = (await r.json()) as { error: { code: string; message: string }; detail: string };
    expect(r.status).toBe(400);
    expect(body.error.code).toBe('model_not_served');
    expect(body.detail).toBe(body.error.message);
  });
});
