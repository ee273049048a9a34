import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { type Attempt, DirectClient } from '@uis/routing';
import { waitFor } from '@uis/sglang-engine/testing';
import type { ScaleOperation } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { elasticRolloutConfig, gatewayOnSims } from '../testing/fixtures.ts';
import { REPO_ROOT } from '../testing/uis-process.ts';

const TOKEN = 'scale-load-admin';
// Each generation takes a few milliseconds of simulated decode, so requests are in flight while replicas drain.
const gw = gatewayOnSims({
  config: elasticRolloutConfig(4, 4),
  server: { adminToken: TOKEN },
  sim: { simDecodeUsPerToken: 1500 },
});

/** The Python direct client under load: it prints `rev N` whenever its discovery revision moves, `fail ...` for a
 * request that failed other than by a 503 with Retry-After, and `done ok=N refused=N failed=N` on stdin's EOF. */
const PYTHON_LOAD = `
import sys, threading
from uis_client import UisClient
from uis_client.errors import UisError
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
ok = refused = failed = 0
last = -1
with UisClient(sys.argv[1]) as uis, uis.direct("rollout") as d:
    while not stop.is_set():
        rev = d.snapshot.topology_revision
        if rev != last:
            last = rev
            print(f"rev {rev}", flush=True)
        try:
            d.generate({"text": "py", "sampling_params": {"max_new_tokens": 4}})
            ok += 1
        except UisError as e:
            if e.status == 503 and getattr(e, "retry_after", None):
                refused += 1
            else:
                failed += 1
                print(f"fail {e.status} {e}", flush=True)
print(f"done ok={ok} refused={refused} failed={failed}", flush=True)
`;

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

async function admin(path: string, body: unknown): Promise<ScaleOperation> {
  const r = await fetch(`${gw.url}/admin${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const j = (await r.json()) as { ok: boolean; result: ScaleOperation; error?: unknown };
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${JSON.stringify(j)}`);
  return j.result;
}

async function settled(op: ScaleOperation): Promise<ScaleOperation> {
  let last = op;
  await waitFor(
    async () => {
      const r = await fetch(`${gw.url}/admin/scale_ops/${op.request_id}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      last = ((await r.json()) as { result: ScaleOperation }).result;
      return ['ACTIVE', 'COMPLETED', 'FAILED', 'CANCELLED', 'NOOP'].includes(last.status);
    },
    60_000,
    `scale operation ${op.request_id} to finish`,
  );
  return last;
}

describe('scale under continuous load', { timeout: 240_000 }, () => {
  it('4 -> 8 -> 2 -> 4 replicas: no request fails, the direct clients (TypeScript, Python) see every revision', async () => {
    const registry = gw.plane.managerOf('rollout').registry;
    const stats = { ok: 0, refused: 0, failed: [] as string[] };
    let running = true;
    // Through the gateway: 4 workers.
    const gateway = Array.from({ length: 4 }, async () => {
      while (running) {
        const r = await fetch(`${gw.url}/rollout/generate`, {
          method: 'POST',
          body: JSON.stringify({ text: 'gw', sampling_params: { max_new_tokens: 4 } }),
        }).catch((e: unknown) => e as Error);
        if (r instanceof Error) {
          stats.failed.push(`gateway ${String(r)}`);
          continue;
        }
        const text = await r.text();
        if (r.status === 200) stats.ok++;
        else if (r.status === 503 && r.headers.get('retry-after')) stats.refused++;
        else stats.failed.push(`gateway ${r.status} ${text.slice(0, 200)}`);
      }
    });
    // The TypeScript direct client: 2 workers, every revision it receives recorded.
    const ts = new DirectClient({ discoveryUrl: `${gw.url}/rollout/engines`, longPollTimeoutS: 5 });
    const tsRevisions = new Set<number>();
    const tsEngines = new Set<string>();
    ts.onSnapshot((s) => tsRevisions.add(s.topology_revision));
    tsRevisions.add((await ts.start()).topology_revision);
    // Distinct prompts, as a rollout sends: one prompt (or one shared prefix) stays on the replica its prefix
    // affinity picked, whatever replicas join.
    let prompt = 0;
    const direct = Array.from({ length: 2 }, async () => {
      while (running) {
        try {
          const attempts: Attempt[] = [];
          await ts.json(
            '/generate',
            { text: `${(prompt++ * 2654435761) % 1000003} ts`, sampling_params: { max_new_tokens: 4 } },
            { attempts },
          );
          stats.ok++;
          const id = attempts.at(-1)?.engineId;
          if (id) tsEngines.add(id);
        } catch (e) {
          stats.failed.push(`ts direct ${String(e)}`);
        }
      }
    });
    // The Python direct client, in its own process.
    const py = spawn('python3', ['-c', PYTHON_LOAD, gw.url], {
      env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'clients', 'python', 'src') },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(py);
    let pyOut = '';
    let pyErr = '';
    py.stdout.on('data', (d: Buffer) => {
      pyOut += d.toString();
    });
    py.stderr.on('data', (d: Buffer) => {
      pyErr += d.toString();
    });
    const pyRevisions = () => new Set([...pyOut.matchAll(/^rev (\d+)$/gm)].map((m) => Number(m[1])));
    await waitFor(
      () => pyRevisions().size > 0 || pyErr.includes('Error'),
      30_000,
      'the python client to start',
    );
    expect(pyErr).toBe('');

    const steps: Array<[string, unknown, number]> = [
      ['/roles/rollout/scale_out', { num_replicas: 8 }, 8],
      ['/roles/rollout/scale_in', { num_replicas: 2, force: true, timeout_secs: 10 }, 2],
      ['/roles/rollout/scale_out', { num_replicas: 4 }, 4],
    ];
    const revisions: number[] = [];
    try {
      for (const [path, body, replicas] of steps) {
        const before = new Set(registry.snapshot().models.policy!.engines.map((e) => e.engine_id));
        tsEngines.clear();
        const op = await settled(await admin(path, body));
        expect(op.status, JSON.stringify(op)).toMatch(/^(ACTIVE|COMPLETED)$/);
        const snap = registry.snapshot();
        expect(snap.models.policy?.engines.filter((e) => e.direct_eligible)).toHaveLength(replicas);
        revisions.push(snap.topology_revision);
        // Both direct clients reach the revision that published the step, and the load goes on meanwhile.
        await waitFor(
          () => tsRevisions.has(snap.topology_revision),
          30_000,
          'the TS client to see the revision',
        );
        await waitFor(
          () => pyRevisions().has(snap.topology_revision),
          30_000,
          'the Python client to see the revision',
        );
        const published = stats.ok;
        await waitFor(() => stats.ok > published + 20, 30_000, 'more requests to succeed');
        // The TS client routes to the replicas the step added while they are there.
        const added = snap.models.policy!.engines.map((e) => e.engine_id).filter((id) => !before.has(id));
        if (added.length > 0)
          await waitFor(
            () => added.some((id) => tsEngines.has(id)),
            30_000,
            'the TS client to use a new replica',
          );
      }
    } finally {
      running = false;
    }
    await Promise.all([...gateway, ...direct]);
    await ts.close();
    py.stdin.end();
    await waitFor(() => /^done /m.test(pyOut), 30_000, 'the python client to finish');
    const done = /^done ok=(\d+) refused=(\d+) failed=(\d+)$/m.exec(pyOut);
    expect(stats.failed).toEqual([]);
    expect(pyOut.split('\n').filter((l) => l.startsWith('fail'))).toEqual([]);
    expect(Number(done?.[3])).toBe(0);
    // The Python client is one thread: it made requests through all three steps.
    expect(Number(done?.[1])).toBeGreaterThan(5);
    expect(new Set(revisions).size).toBe(3);
    console.log(
      `scale under load: ${stats.ok} ok + ${stats.refused} refused (TS), python ${done?.[0]}; revisions ${revisions.join(' -> ')}`,
    );
  });
});
