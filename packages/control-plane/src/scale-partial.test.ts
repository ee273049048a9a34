import type { Launcher, LaunchRequest } from '@uis/manager';
import { layoutRole } from '@uis/manager/testing';
import type { SGLangEngine } from '@uis/sglang-engine';
import { parseSimArgs, type SimServer, startSimServer } from '@uis/sglang-sim';
import { parseConfig } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from './control-plane.ts';
import { createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';

/** Sim engines; the ones named in `refuse` have their weight updates refused. */
class RefusingLauncher implements Launcher {
  readonly kind = 'sim-inprocess';
  readonly ownsProcesses = true;
  readonly sims = new InProcessSimLauncher({});
  readonly refuse = new Set<string>();
  async create(req: LaunchRequest): Promise<SGLangEngine> {
    const engine = await this.sims.create(req);
    if (this.refuse.has(req.replica.engine_id))
      engine.updateWeights = () => Promise.reject(new Error('weight sync refused (test fault)'));
    return engine;
  }
}

/** An elastic policy on 1-GPU engines: `own` started by the plan, `room` more reserved. */
function elastic(own: number, room: number, gpusPerEngine = 1, nodes = [own + room]) {
  return parseConfig({
    cluster: { nodes: nodes.map((gpus, i) => ({ name: `node-${i}`, gpus })) },
    roles: {
      rollout: layoutRole(
        'decoupled',
        {
          name: 'policy',
          weight_source: 'disk',
          elastic_enabled: true,
          engine_groups: [
            { num_gpus: own * gpusPerEngine, gpus_per_engine: gpusPerEngine },
            { worker_type: 'placeholder', num_gpus: room, gpus_per_engine: 1 },
          ],
        },
        { routing: {} },
      ),
    },
  });
}

const launchers: RefusingLauncher[] = [];
const sims: SimServer[] = [];
afterAll(async () => {
  await Promise.allSettled([...launchers.map((l) => l.sims.closeAll()), ...sims.map((s) => s.close())]);
});

async function plane(config = elastic(4, 4)): Promise<{ p: ControlPlane; launcher: RefusingLauncher }> {
  const launcher = new RefusingLauncher();
  launchers.push(launcher);
  return { p: await createControlPlane({ config, launcher }), launcher };
}

const engines = (p: ControlPlane) => p.managerOf('rollout').registry.snapshot().models.policy?.engines ?? [];

/** A sim engine started outside uis on 127.0.0.1 (what Relax's external mode attaches). */
async function externalEngine(modelPath: string): Promise<SimServer> {
  const { options } = parseSimArgs(['--model-path', modelPath, '--host', '127.0.0.1', '--port', '0'], {});
  const s = await startSimServer(options);
  sims.push(s);
  await s.ready;
  return s;
}

describe("scale-out's partial success policy and attached engines", { timeout: 120_000 }, () => {
  it('keep_partial: the replica that fails its weight sync is removed alone, the others join; rollback_all removes all', async () => {
    const { p, launcher } = await plane();
    try {
      await p.managerOf('rollout').updateWeights('policy', { source: 'version', weight_version: 'step-1' });
      launcher.refuse.add('policy/5');
      const seen = new Set<string>();
      p.managerOf('rollout').registry.subscribe((s) => {
        for (const e of s.models.policy?.engines ?? []) seen.add(e.engine_id);
      });
      const op = p.scale.scaleOut(
        'rollout',
        { num_replicas: 7, partial_success_policy: 'keep_partial' },
        'test',
      );
      expect(op.partial_success_policy).toBe('keep_partial');
      const done = await p.scale.settled(op.request_id);
      expect(done).toMatchObject({
        status: 'ACTIVE',
        engine_ids: ['policy/4', 'policy/6'],
        failed_engines: [{ engine_id: 'policy/5', error: expect.stringContaining('weight sync refused') }],
      });
      expect(done.message).toContain('failed and removed (keep_partial): policy/5');
      // The failed one never reached discovery and no engine of it is left; the kept ones serve at the version.
      expect(seen.has('policy/5')).toBe(false);
      expect(launcher.sims.serversOf('policy/5')).toEqual([]);
      expect(engines(p).map((e) => [e.engine_id, e.weight_version, e.direct_eligible])).toEqual(
        ['policy/0', 'policy/1', 'policy/2', 'policy/3', 'policy/4', 'policy/6'].map((id) => [
          id,
          'step-1',
          true,
        ]),
      );

      // The default, rollback_all: the same fault takes every replica of the operation with it.
      launcher.refuse.add('policy/7');
      const all = await p.scale.settled(p.scale.scaleOut('rollout', { num_replicas: 8 }, 'test').request_id);
      expect(all).toMatchObject({ status: 'FAILED', partial_success_policy: 'rollback_all' });
      expect(engines(p)).toHaveLength(6);
    } finally {
      await p.stop();
    }
  });

  it('engine_urls: engines already running on 127.0.0.1 are attached (prechecked, synced), removed by URL', async () => {
    const { p } = await plane(elastic(2, 2));
    try {
      await p.managerOf('rollout').updateWeights('policy', { source: 'version', weight_version: 'step-3' });
      const [a, b] = [await externalEngine('/models/policy'), await externalEngine('/models/policy')];
      const wrong = await externalEngine('/models/another-model');
      const op = p.scale.scaleOut(
        'rollout',
        { engine_urls: [a.url, `${b.url}/`, wrong.url], partial_success_policy: 'keep_partial' },
        'test',
      );
      const done = await p.scale.settled(op.request_id);
      // The engine serving another model fails its precheck (model path) and is let go; the two others join.
      expect(done.status).toBe('ACTIVE');
      expect(done.engine_ids).toHaveLength(2);
      expect(done.failed_engines).toEqual([
        { engine_id: expect.any(String), error: expect.stringContaining('/models/another-model') },
      ]);
      const byUrl = new Map(engines(p).map((e) => [e.base_url, e]));
      for (const s of [a, b])
        expect(byUrl.get(s.url)).toMatchObject({ weight_version: 'step-3', direct_eligible: true });
      expect(byUrl.has(wrong.url)).toBe(false);
      // Attached again: already members, nothing to do.
      const again = await p.scale.settled(
        p.scale.scaleOut('rollout', { engine_urls: [a.url] }, 'test').request_id,
      );
      expect(again.status).toBe('NOOP');
      // Removed by URL: out of discovery; uis did not start it, so it keeps running.
      const gone = await p.scale.settled(
        p.scale.scaleIn('rollout', { engine_urls: [a.url] }, 'test').request_id,
      );
      expect(gone.status).toBe('COMPLETED');
      expect(engines(p).map((e) => e.base_url)).not.toContain(a.url);
      expect((await fetch(`${a.url}/health`)).status).toBe(200);
    } finally {
      await p.stop();
    }
  });

  it('a scale-out the planner refuses names every violation before anything starts', async () => {
    // node-0: a 3-GPU engine and 1 reserved GPU; node-1: 4 reserved GPUs. Two more 3-GPU engines need 6 of the
    // 5 reserved bundles, and the first would take node-0's last GPU and two of node-1's.
    const { p } = await plane(elastic(1, 5, 3, [4, 4]));
    try {
      let refusal: unknown;
      try {
        p.scale.scaleOut('rollout', { num_replicas: 3 }, 'test');
      } catch (e) {
        refusal = e;
      }
      expect(refusal).toMatchObject({
        code: 'no_reserved_bundles',
        status: 409,
        details: [
          expect.objectContaining({ code: 'no_reserved_bundles' }),
          expect.objectContaining({
            code: 'engine_straddles_nodes',
            message: expect.stringMatching(/^policy\/1: /),
          }),
        ],
      });
      expect((refusal as Error).message).toMatch(/needs 6 reserved bundles; 5 are free.*policy\/1: /);
      expect(p.scale.list()).toEqual([]);
      expect(engines(p)).toHaveLength(1);
    } finally {
      await p.stop();
    }
  });
});
