import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { DiscoverySnapshotSchema } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';

/** Relax's existing readers against our discovery over HTTP: the default answer (no query) is the one document
 * schema-2 clients and Relax's autoscaler and GenRM readers all parse (the RFC's additive phase), `?schema=1` and
 * `?schema_version=1` the pure legacy shape. Layout: rollout `policy` and `policy-code` (2 engines each), GenRM
 * `judge` (1 engine). */
const gw = gatewayOnSims({ config: splitTestConfig(), server: { adminToken: 'relax-discovery-admin' } });

/** What Relax's autoscaler does with `GET /<service>/engines` (no query), written for this test: the rollout branch
 * walks models -> engine_groups -> engines, keeps active rows with a url and names them `engine_<rank>`; the GenRM
 * branch reads `instances` (or the whole document as one instance) and keeps engines with host and port. */
const RELAX_READER = `
import json, sys, urllib.request

def fetch(url):
    with urllib.request.urlopen(url) as r:
        assert r.status == 200, r.status
        return json.load(r)

def rollout_engines(data):
    found = []
    for model_name, model in data.get("models", {}).items():
        for group in model.get("engine_groups", []):
            for engine in group.get("engines", []):
                if engine.get("status") != "active" or not engine.get("url"):
                    continue
                found.append({"id": "engine_%s" % engine.get("rank", "unknown"), "url": engine["url"],
                              "model_name": model_name})
    return found

def genrm_engines(data):
    instances = data.get("instances") or {"default": data}
    if len([m for m, i in instances.items() if i.get("engines", [])]) > 1:
        return None
    found = []
    for model_name, instance in instances.items():
        for engine in instance.get("engines", []):
            host, port = engine.get("host"), engine.get("port")
            if host and port:
                found.append({"id": "%s:%s:%s" % (model_name, host, port), "url": "http://%s:%s" % (host, port),
                              "model_name": model_name})
    return found

def worker_rows(data):
    return [e for m in data.get("models", {}).values() for g in m.get("engine_groups", []) for e in g.get("engines", [])]

base = sys.argv[1]
out = {}
for name, path in json.loads(sys.argv[2]).items():
    data = fetch(base + path)
    rows = worker_rows(data)
    out[name] = {
        "rollout": rollout_engines(data),
        "genrm": genrm_engines(data),
        "total_engines": data.get("total_engines"),
        "model_totals": {m: v.get("total_engines") for m, v in data.get("models", {}).items()},
        "null_keys": sorted({k for row in rows for k, v in row.items() if v is None}),
        "ranks": [row.get("rank") for row in rows],
    }
json.dump(out, sys.stdout)
`;

interface ReaderView {
  rollout: Array<{ id: string; url: string; model_name: string }>;
  genrm: Array<{ id: string; url: string; model_name: string }> | null;
  total_engines: number | null;
  model_totals: Record<string, number | null>;
  null_keys: string[];
  ranks: number[];
}

/** Runs the reader asynchronously: the gateway answering it lives in this process. */
async function relaxReads(paths: Record<string, string>): Promise<Record<string, ReaderView>> {
  const { stdout } = await promisify(execFile)(
    'python3',
    ['-c', RELAX_READER, gw.url, JSON.stringify(paths)],
    {
      encoding: 'utf8',
      timeout: 30_000,
    },
  );
  return JSON.parse(stdout) as Record<string, ReaderView>;
}

describe("Relax's discovery readers against the default answer", { timeout: 60_000 }, () => {
  it("the autoscaler's rollout reader finds every engine, ids unique across models, ranks from the offsets", async () => {
    const views = await relaxReads({
      plain: '/rollout/engines',
      schema: '/rollout/engines?schema=1',
      version: '/rollout/engines?schema_version=1',
      filtered: '/rollout/engines?model_name=policy-code',
    });
    const plain = views.plain!;
    expect(plain.rollout).toHaveLength(4);
    expect(new Set(plain.rollout.map((e) => e.id)).size).toBe(4);
    expect(plain.rollout.map((e) => e.id).sort()).toEqual(['engine_0', 'engine_1', 'engine_2', 'engine_3']);
    expect(plain.rollout.map((e) => e.model_name)).toEqual([
      'policy',
      'policy',
      'policy-code',
      'policy-code',
    ]);
    expect(plain.total_engines).toBe(4);
    expect(plain.model_totals).toEqual({ policy: 2, 'policy-code': 2 });
    expect(plain.null_keys).toEqual([]);

    // The urls Relax reads are the schema-2 engines' base urls.
    const snap = DiscoverySnapshotSchema.parse(await (await fetch(`${gw.url}/rollout/engines`)).json());
    const urls = Object.values(snap.models).flatMap((m) => m.engines.map((e) => e.base_url));
    expect(plain.rollout.map((e) => e.url)).toEqual(urls);

    // Both legacy spellings: the same engines, the pure legacy shape.
    expect(views.schema).toEqual(plain);
    expect(views.version).toEqual(plain);

    // model_name filters, and policy-code's group keeps its rank offset (policy's group holds ranks 0-1).
    const filtered = views.filtered!;
    expect(filtered.rollout.map((e) => e.id)).toEqual(['engine_2', 'engine_3']);
    expect(filtered.ranks).toEqual([2, 3]);
    expect(filtered.total_engines).toBe(2);
    expect(Object.keys(filtered.model_totals)).toEqual(['policy-code']);
  });

  it("the GenRM reader finds the judge's engine (instances, host, port) by default and in both legacy spellings", async () => {
    const views = await relaxReads({
      plain: '/genrm/engines',
      schema: '/genrm/engines?schema=1',
      version: '/genrm/engines?schema_version=1',
      filtered: '/genrm/engines?model_name=judge',
      other: '/genrm/engines?model_name=nobody',
    });
    for (const name of ['plain', 'schema', 'version', 'filtered']) {
      const genrm = views[name]!.genrm!;
      expect(genrm).toHaveLength(1);
      expect(genrm[0]!.model_name).toBe('judge');
      expect(genrm[0]!.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(views[name]!.null_keys).toEqual([]);
    }
    expect(views.other!.genrm).toEqual([]);
  });

  it('the default answer stays a schema-2 document: the same snapshot, the legacy keys beside it', async () => {
    const body = (await (await fetch(`${gw.url}/rollout/engines`)).json()) as Record<string, unknown>;
    const lean = (await (await fetch(`${gw.url}/rollout/engines?schema=2`)).json()) as Record<
      string,
      unknown
    >;
    const snap = DiscoverySnapshotSchema.parse(body);
    expect(snap.schema_version).toBe(2);
    expect(snap).toMatchObject(DiscoverySnapshotSchema.parse(lean));
    expect(lean).not.toHaveProperty('total_engines');
    const policy = snap.models.policy!;
    expect(policy.engines).toHaveLength(2);
    expect(policy).toMatchObject({ router_ip: null, router_port: null, total_engines: 2 });
    expect(policy.engine_groups?.[0]).toMatchObject({
      group_index: 0,
      num_gpus_per_engine: 1,
      num_new_engines: 2,
    });
    expect(body).not.toHaveProperty('instances');
    // GenRM's document carries instances too.
    const genrm = DiscoverySnapshotSchema.parse(await (await fetch(`${gw.url}/genrm/engines`)).json());
    expect(Object.keys(genrm.instances ?? {})).toEqual(['judge']);
  });

  it('a long-poll that times out answers the additive document, and the legacy shape when asked', async () => {
    const { registry } = gw.plane.managers.get('rollout')!;
    const epoch = encodeURIComponent(registry.snapshot().registry_epoch ?? '');
    const q = `wait_revision=${registry.revision}&timeout_s=0.2&registry_epoch=${epoch}`;
    const waited = (await (await fetch(`${gw.url}/rollout/engines?${q}`)).json()) as Record<string, unknown>;
    expect(DiscoverySnapshotSchema.parse(waited).topology_revision).toBe(registry.revision);
    expect(waited.total_engines).toBe(4);
    const legacy = (await (await fetch(`${gw.url}/rollout/engines?${q}&schema=1`)).json()) as Record<
      string,
      unknown
    >;
    expect(Object.keys(legacy).sort()).toEqual(['models', 'total_engines']);
  });
});
