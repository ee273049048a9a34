import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { layoutRole } from '@uis/manager/testing';
import { DiscoverySnapshotSchema, parseConfig } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims } from '../testing/fixtures.ts';

/** Relax's discovery readers (three generations of its unified-inference code) against our discovery, and the
 * gateway answering the same requests. Layout: rollout `policy` (2 engines), GenRM instances `judge-a` (default) and
 * `judge-b`, one engine each, all resident. */
const config = parseConfig({
  cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
  roles: {
    rollout: layoutRole('decoupled', {
      name: 'policy',
      weight_source: 'disk',
      engine_groups: [{ num_gpus: 2, gpus_per_engine: 1, tp: 1 }],
    }),
    genrm: layoutRole(
      'decoupled',
      ['judge-a', 'judge-b'].map((name) => ({
        name,
        weight_source: 'static',
        engine_groups: [{ num_gpus: 1, gpus_per_engine: 1, tp: 1 }],
      })),
      { routing: { default_model: 'judge-a', route_keys: { math: 'judge-b' } } },
    ),
  },
});
const gw = gatewayOnSims({ config, server: { adminToken: 'relax-readers-admin' } });

/**
 * The rules each Relax generation's reader applies to `GET /<role>/engines`, written for this test from reading
 * Relax's code (relax/engine/inference/ and relax/engine/inference.py); every field it requires is read with [].
 * - gen1 (`RoleSnapshot.from_dict`, `select_model`): needs role, topology_revision, each model's and engine's
 *   state; model -> route key (`routing.route_keys`, else the key as a model name) -> default -> the only model; an
 *   unknown name is 400; a router needs a ready model, else a ready direct_eligible engine.
 * - gen2 (`role_snapshot_from_dict`, `resolve_model`, `select_target`): needs manager_epoch; route keys through
 *   `routing.route_key_to_model`; an unknown model is 400; `admission` and a ready state, else 503.
 * - gen3 (`InferenceRouter.select`): model or alias -> `routing.route_keys` -> default; not in models is 400; a ready
 *   state, then router_url, else a ready direct_eligible engine with a base_url.
 */
const RELAX_READERS = `
import json, sys, urllib.request

STATES = {"starting", "ready", "draining", "sleeping", "onloading", "dead"}

def fetch(url):
    with urllib.request.urlopen(url) as r:
        return json.load(r)

def engines_of(model):
    out = []
    for e in model.get("engines", ()):
        assert e["state"] in STATES, e["state"]
        out.append({"engine_id": e["engine_id"], "base_url": e.get("base_url"), "state": e["state"],
                    "direct_eligible": bool(e.get("direct_eligible", False))})
    return out

def direct(name, engines):
    ready = [e for e in engines if e["state"] == "ready" and e["direct_eligible"] and e["base_url"]]
    return {"model": name, "urls": sorted(e["base_url"] for e in ready)} if ready else {"status": 503}

def gen1(doc, model, route_key):
    int(doc["topology_revision"]); doc["role"]
    models = {n: {"state": m["state"], "router_url": m.get("router_url"), "engines": engines_of(m)}
              for n, m in doc.get("models", {}).items()}
    routing = doc.get("routing") or {}
    if model is not None:
        name = model if model in models else None
    elif route_key is not None:
        name = (routing.get("route_keys") or {}).get(route_key, route_key)
        name = name if name in models else None
    else:
        name = routing.get("default_model") if routing.get("default_model") in models else (
            next(iter(models)) if len(models) == 1 else None)
    if name is None:
        return {"status": 400}
    m = models[name]
    if m["router_url"] is not None:
        return {"model": name, "urls": [m["router_url"]]} if m["state"] == "ready" else {"status": 503}
    return direct(name, m["engines"])

def gen2(doc, model, route_key):
    epoch = doc["manager_epoch"]
    assert epoch, "discovery requires a non-empty manager epoch"
    routing = doc.get("routing", {})
    keys = dict(routing.get("route_key_to_model", {}))
    models = {n: {"state": m["state"] if m.get("state") else None, "admission": bool(m.get("admission", False)),
                  "router_url": m.get("router_url"), "engines": engines_of(m)}
              for n, m in dict(doc.get("models", {})).items()}
    name = model
    if name is None and route_key is not None:
        name = keys.get(route_key)
    if name is None:
        name = routing.get("default_model")
    if name is None or name not in models:
        return {"status": 400}
    m = models[name]
    if not m["admission"] or m["state"] != "ready":
        return {"status": 503}
    if m["router_url"]:
        return {"model": name, "urls": [m["router_url"]]}
    return direct(name, m["engines"])

def gen3(doc, model, route_key):
    models, routing = doc["models"], doc.get("routing", {})
    if model is not None:
        name = model if model in models else routing.get("aliases", {}).get(model)
    elif route_key is not None:
        name = routing.get("route_keys", {}).get(route_key)
    else:
        name = routing.get("default_model")
    if name not in models:
        return {"status": 400}
    info = models[name]
    if info["state"] != "ready":
        return {"status": 503}
    if info.get("router_url"):
        return {"model": name, "urls": [info["router_url"]]}
    if info.get("router_required"):
        return {"status": 503}
    return direct(name, engines_of(info))

base, asks = sys.argv[1], json.loads(sys.argv[2])
out = []
for ask in asks:
    docs = {"gen1": fetch(base + "/" + ask["role"] + "/engines?schema_version=2"),
            "gen2": fetch(base + "/" + ask["role"] + "/engines?schema_version=2"),
            "gen3": fetch(base + "/" + ask["role"] + "/engines")}
    reader = {"gen1": gen1, "gen2": gen2, "gen3": gen3}
    out.append({g: reader[g](docs[g], ask.get("model"), ask.get("route_key")) for g in docs})
json.dump(out, sys.stdout)
`;

interface Ask {
  role: string;
  model?: string;
  route_key?: string;
}
type Pick = { model: string; urls: string[] } | { status: number };

async function relaxPicks(asks: Ask[]): Promise<Array<Record<'gen1' | 'gen2' | 'gen3', Pick>>> {
  const { stdout } = await promisify(execFile)(
    'python3',
    ['-c', RELAX_READERS, gw.url, JSON.stringify(asks)],
    {
      encoding: 'utf8',
      timeout: 30_000,
    },
  );
  return JSON.parse(stdout) as Array<Record<'gen1' | 'gen2' | 'gen3', Pick>>;
}

/** What the gateway does with the same request: the model whose replica served it, or the refusal's status. */
async function gatewayPick(ask: Ask): Promise<{ model: string; url: string } | { status: number }> {
  const { role, ...keys } = ask;
  const r = await fetch(`${gw.url}/${role}/generate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...keys, text: 'score', sampling_params: { max_new_tokens: 1 } }),
  });
  await r.text();
  if (r.status !== 200) return { status: r.status };
  const engine = r.headers.get('x-uis-engine-id') ?? '';
  const snap = DiscoverySnapshotSchema.parse(await (await fetch(`${gw.url}/${role}/engines`)).json());
  const model = engine.slice(0, engine.lastIndexOf('/'));
  const url = snap.models[model]?.engines.find((e) => e.engine_id === engine)?.base_url ?? '';
  return { model, url };
}

describe("Relax's discovery readers and resolvers against uis", { timeout: 60_000 }, () => {
  it('every generation parses discovery (manager_epoch, route_key_to_model, admission) and picks as the gateway does', async () => {
    const asks: Ask[] = [
      { role: 'rollout' },
      { role: 'rollout', model: 'policy' },
      { role: 'genrm' },
      // A route key naming a GenRM instance selects that instance (it was a 400 before).
      { role: 'genrm', route_key: 'judge-b' },
      { role: 'genrm', route_key: 'judge-a' },
      { role: 'genrm', route_key: 'math' },
      { role: 'genrm', model: 'judge-b' },
    ];
    const relax = await relaxPicks(asks);
    for (const [i, ask] of asks.entries()) {
      const ours = await gatewayPick(ask);
      expect(ours, JSON.stringify(ask)).toHaveProperty('model');
      const served = ours as { model: string; url: string };
      for (const gen of ['gen1', 'gen2', 'gen3'] as const) {
        const pick = relax[i]![gen] as { model: string; urls: string[] };
        expect(pick, `${gen} ${JSON.stringify(ask)}`).toMatchObject({ model: served.model });
        expect(pick.urls).toContain(served.url);
      }
    }
    expect(await gatewayPick({ role: 'genrm', route_key: 'judge-b' })).toMatchObject({ model: 'judge-b' });
    expect(await gatewayPick({ role: 'genrm' })).toMatchObject({ model: 'judge-a' });
  });

  it('an explicit unknown model is a 400 for the gateway and for all three generations', async () => {
    const asks: Ask[] = [
      { role: 'rollout', model: 'no-such-model' },
      { role: 'genrm', model: 'judge-c' },
    ];
    const relax = await relaxPicks(asks);
    for (const [i, ask] of asks.entries()) {
      expect(await gatewayPick(ask)).toEqual({ status: 400 });
      expect(relax[i]).toEqual({ gen1: { status: 400 }, gen2: { status: 400 }, gen3: { status: 400 } });
    }
    const r = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'no-such-model', text: 'x' }),
    });
    const body = (await r.json()) as { error: { code: string; path: string } };
    expect(body.error).toMatchObject({ code: 'model_not_served', path: 'body.model' });
  });

  it('publishes the additive fields in every shape Relax reads: default, schema 2, long-poll', async () => {
    const { registry } = gw.plane.managers.get('genrm')!;
    const epoch = registry.snapshot().registry_epoch!;
    const waited = `wait_revision=${registry.revision}&timeout_s=0.1&registry_epoch=${epoch}`;
    for (const q of ['', '?schema=2', '?schema_version=2', `?${waited}`]) {
      const doc = DiscoverySnapshotSchema.parse(await (await fetch(`${gw.url}/genrm/engines${q}`)).json());
      expect(doc.manager_epoch, q).toBe(epoch);
      expect(doc.routing?.route_key_to_model).toEqual({
        math: 'judge-b',
        'judge-a': 'judge-a',
        'judge-b': 'judge-b',
      });
      expect(doc.routing?.route_keys).toEqual(doc.routing?.route_key_to_model);
      for (const m of Object.values(doc.models)) {
        expect(m).toMatchObject({ admission: true, route_mode: 'direct', weight_source: 'static' });
      }
    }
    const rollout = DiscoverySnapshotSchema.parse(await (await fetch(`${gw.url}/rollout/engines`)).json());
    expect(rollout.models.policy).toMatchObject({
      admission: true,
      route_mode: 'direct',
      weight_source: 'disk',
    });
  });

  it('legacy rows carry the pid serving them (here: the in-process simulator, so this process)', async () => {
    const legacy = (await (await fetch(`${gw.url}/rollout/engines?schema=1`)).json()) as {
      models: Record<string, { engine_groups: Array<{ engines: Array<Record<string, unknown>> }> }>;
    };
    const rows = legacy.models.policy!.engine_groups.flatMap((g) => g.engines);
    expect(rows).toHaveLength(2);
    for (const row of rows) expect(row).toMatchObject({ status: 'active', pid: process.pid });
  });

  it("GenRM's /metrics answers Relax's per-instance fields", async () => {
    const r = await fetch(`${gw.url}/genrm/metrics`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({
      service: 'genrm',
      instances: {
        'judge-a': { model_path: '/models/judge-a', num_gpus: 1, num_engines: 1 },
        'judge-b': { model_path: '/models/judge-b', num_gpus: 1, num_engines: 1 },
      },
    });
    expect((await fetch(`${gw.url}/rollout/metrics`)).status).toBe(404);
  });
});
