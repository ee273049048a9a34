import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Launcher, LaunchRequest } from '@uis/manager';
import { layoutRole } from '@uis/manager/testing';
import type { SGLangEngine } from '@uis/sglang-engine';
import { type DiscoverySnapshot, parseConfig, type ScaleOperation } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from './control-plane.ts';
import { createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';

/** An elastic policy: 4 replicas of 1 GPU started by the plan, 4 GPUs reserved for scale-out. */
export function elasticConfig(extra: Record<string, unknown> = {}) {
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
    training: { actor_gpus: 0 },
    roles: {
      rollout: layoutRole(
        'decoupled',
        {
          name: 'policy',
          weight_source: 'disk',
          elastic_enabled: true,
          engine_groups: [
            { num_gpus: 4, gpus_per_engine: 1 },
            { worker_type: 'placeholder', num_gpus: 4, gpus_per_engine: 1 },
          ],
        },
        { routing: {} },
      ),
    },
    ...extra,
  });
}

/** Sim engines; the engines named in `faults` start with their own sim options (slow starts, errors), or get their
 * weight updates refused. */
class FaultyLauncher implements Launcher {
  readonly kind = 'sim-inprocess';
  readonly ownsProcesses = true;
  readonly healthy = new InProcessSimLauncher({});
  readonly faulty = new InProcessSimLauncher({});
  readonly slow = new InProcessSimLauncher({ simStartupMs: 120_000 });
  readonly faults = new Map<string, 'error' | 'slow' | 'weights'>();
  async create(req: LaunchRequest): Promise<SGLangEngine> {
    const fault = this.faults.get(req.replica.engine_id);
    const l = fault === 'slow' ? this.slow : fault === 'error' ? this.errors : this.healthy;
    const engine = await l.create(req);
    if (fault === 'weights')
      engine.updateWeights = () => Promise.reject(new Error('weight sync refused (test fault)'));
    return engine;
  }
  readonly errors = new InProcessSimLauncher({ simErrorRate: 1 });
  serversOf(id: string) {
    return [...this.healthy.serversOf(id), ...this.slow.serversOf(id), ...this.errors.serversOf(id)];
  }
  async closeAll() {
    await Promise.all([this.healthy, this.faulty, this.slow, this.errors].map((l) => l.closeAll()));
  }
}

const launchers: FaultyLauncher[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function plane(opts: { dbPath?: string; launcher?: FaultyLauncher } = {}) {
  const launcher = opts.launcher ?? new FaultyLauncher();
  launchers.push(launcher);
  const p = await createControlPlane({
    config: elasticConfig(),
    launcher,
    ...(opts.dbPath ? { dbPath: opts.dbPath } : {}),
  });
  return { plane: p, launcher };
}

const policy = (p: ControlPlane) => p.managerOf('rollout').registry.snapshot().models.policy;
const eligible = (s: DiscoverySnapshot) =>
  (s.models.policy?.engines ?? []).filter((e) => e.direct_eligible).map((e) => e.engine_id);

describe('scale operations', { timeout: 120_000 }, () => {
  it('scales out through every state to ACTIVE in one topology revision, NOOP when met, one at a time, LIFO in', async () => {
    const { plane: p } = await plane();
    try {
      const seen: string[][] = [];
      p.managerOf('rollout').registry.subscribe((s) => seen.push(eligible(s)));
      const op = p.scale.scaleOut('rollout', { num_replicas: 6 }, 'test');
      expect(op).toMatchObject({ status: 'PENDING', model_name: 'policy', num_replicas: 6 });
      // One scale operation per model at a time.
      expect(() => p.scale.scaleIn('rollout', { num_replicas: 5 }, 'test')).toThrow(
        expect.objectContaining({ code: 'model_operation_in_progress', status: 409 }),
      );
      const done = await p.scale.settled(op.request_id);
      expect(done).toMatchObject({ status: 'ACTIVE', engine_ids: ['policy/4', 'policy/5'] });
      const states = p.events
        .list({ limit: 100 })
        .filter(
          (e) =>
            e.kind.startsWith('scale.') && (e.data as { request_id?: string }).request_id === op.request_id,
        )
        .map((e) => e.kind);
      expect(states).toEqual([
        'scale.pending',
        'scale.creating',
        'scale.health_checking',
        'scale.weight_syncing',
        'scale.ready',
        'scale.active',
      ]);
      // The two new replicas became eligible together: no revision with 5.
      expect(seen.map((s) => s.length)).toEqual([6]);
      expect(p.scale.scaleOut('rollout', { num_replicas: 6 }, 'test').status).toBe('NOOP');
      // Below the plan's 4 without force: 400 naming the initial replicas; a dry run names the LIFO victims.
      expect(() => p.scale.scaleIn('rollout', { num_replicas: 3 }, 'test')).toThrow(
        expect.objectContaining({ code: 'scale_in_protected', status: 400, path: 'num_replicas' }),
      );
      const dry = p.scale.scaleIn('rollout', { num_replicas: 3, force: true, dry_run: true }, 'test');
      expect(dry).toMatchObject({
        status: 'COMPLETED',
        dry_run: true,
        engine_ids: ['policy/5', 'policy/4', 'policy/3'],
      });
      expect(policy(p)?.engines).toHaveLength(6);
      const inOp = p.scale.scaleIn('rollout', { num_replicas: 5, timeout_secs: 5 }, 'test');
      expect(await p.scale.settled(inOp.request_id)).toMatchObject({
        status: 'COMPLETED',
        engine_ids: ['policy/5'],
      });
      expect(policy(p)?.engines.map((e) => e.engine_id)).toEqual([
        'policy/0',
        'policy/1',
        'policy/2',
        'policy/3',
        'policy/4',
      ]);
      expect(p.scale.list({ kind: 'scale_in' }).map((o) => o.status)).toEqual(['COMPLETED', 'COMPLETED']);
      expect(() => p.scale.get('nope')).toThrow(
        expect.objectContaining({ code: 'unknown_scale_request', status: 404 }),
      );
      expect(() => p.scale.scaleOut('rollout', { num_replicas: 9 }, 'test')).toThrow(
        expect.objectContaining({ code: 'no_reserved_bundles' }),
      );
    } finally {
      await p.stop();
    }
  });

  it.each([
    ['its precheck (every generation fails)', 'error' as const],
    ['its weight sync', 'weights' as const],
  ])(
    'a replica that fails %s is never published; the operation fails and leaves no engine',
    async (_n, fault) => {
      const { plane: p, launcher } = await plane();
      try {
        // The model moves to a version first: a new replica must be synced to it.
        await p.managerOf('rollout').updateWeights('policy', { source: 'version', weight_version: 'step-1' });
        launcher.faults.set('policy/5', fault);
        const seen: string[] = [];
        p.managerOf('rollout').registry.subscribe((s) =>
          seen.push(...(s.models.policy?.engines ?? []).map((e) => e.engine_id)),
        );
        const op = p.scale.scaleOut('rollout', { num_replicas: 6 }, 'test');
        const done = await p.scale.settled(op.request_id);
        expect(done.status).toBe('FAILED');
        expect(done.failed_engines.map((f) => f.engine_id)).toEqual(['policy/5']);
        expect(done.error_message).toContain(
          fault === 'error' ? 'one-token generation' : 'weight sync refused',
        );
        // rollback_all: the healthy one of the pair is removed too; neither was ever in discovery.
        expect(seen.filter((id) => id === 'policy/4' || id === 'policy/5')).toEqual([]);
        expect([...launcher.serversOf('policy/4'), ...launcher.serversOf('policy/5')]).toEqual([]);
        expect(policy(p)?.engines).toHaveLength(4);
      } finally {
        await p.stop();
      }
    },
  );

  it('a scale-out cancelled mid-way leaves no engine behind', async () => {
    const { plane: p, launcher } = await plane();
    try {
      launcher.faults.set('policy/4', 'slow');
      const op = p.scale.scaleOut('rollout', { num_replicas: 5 }, 'test');
      await expect.poll(() => p.scale.get(op.request_id).status).toBe('CREATING');
      const cancelled = await p.scale.cancel(op.request_id);
      expect(cancelled).toMatchObject({ status: 'CANCELLED', error_message: null });
      expect(launcher.serversOf('policy/4')).toEqual([]);
      expect(policy(p)?.engines).toHaveLength(4);
      await expect(p.scale.cancel(op.request_id)).rejects.toMatchObject({ code: 'scale_not_cancellable' });
    } finally {
      await p.stop();
    }
  });

  it('a stop during a scale-out leaves it unfinished; the next start resumes it, and restores the finished target', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'uis-scale-'));
    dirs.push(dir);
    const dbPath = join(dir, 'uis.db');
    const launcher = new FaultyLauncher();
    launcher.faults.set('policy/4', 'slow');
    const first = await plane({ dbPath, launcher });
    const op = first.plane.scale.scaleOut('rollout', { num_replicas: 5 }, 'test');
    await expect.poll(() => first.plane.scale.get(op.request_id).status).toBe('CREATING');
    await first.plane.stop();
    expect(launcher.serversOf('policy/4')).toEqual([]);
    launcher.faults.clear();
    const second = await plane({ dbPath, launcher });
    try {
      const resumed: ScaleOperation = await second.plane.scale.settled(op.request_id);
      expect(resumed).toMatchObject({ status: 'ACTIVE', engine_ids: ['policy/4'] });
      expect(policy(second.plane)?.engines).toHaveLength(5);
    } finally {
      await second.plane.stop();
    }
    // A start after a finished scale-out brings the model back to its target.
    const third = await plane({ dbPath, launcher });
    try {
      const restore = third.plane.scale.list({ status: 'PENDING' })[0] ?? third.plane.scale.list()[0];
      expect(restore?.actor).toBe('system');
      await third.plane.scale.settled(restore?.request_id as string);
      expect(policy(third.plane)?.engines).toHaveLength(5);
    } finally {
      await third.plane.stop();
    }
  });
});
