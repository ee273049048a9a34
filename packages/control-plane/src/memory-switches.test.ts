import { deferConfig } from '@uis/manager/testing';
import { planPlacement } from '@uis/planner';
import { PROCESS_GPUS } from '@uis/sglang-sim';
import { parseConfig, RESUME_ORDER, type UisConfig } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';

/** The defer layout on 8 GPUs of 100 GB, every model sized so that some weights fit beside the next phase and some
 * do not: policy (tp4) 10 GB weights + 20 GB KV + 1 GB graphs per GPU, judge (tp4) 30 + 20 + 1, teacher (tp8)
 * 40 + 20 + 1, the trainer 30 GB. The engines share the GPUs' memory in the simulator, which fails a resume that
 * does not fit as SGLang does (the engine dies). */
function sizedDefer(): UisConfig {
  const doc = deferConfig() as ReturnType<typeof deferConfig> & Record<string, unknown>;
  const weights: Record<string, number> = { policy: 40, judge: 120, teacher: 320 };
  for (const role of Object.values(doc.roles))
    for (const m of role.models as Array<Record<string, unknown>>)
      m.memory = { weight_gb: weights[m.name as string], kv_cache_share: 0.2, cuda_graph_gb: 1 };
  return parseConfig({
    ...doc,
    cluster: {
      nodes: [{ name: 'node-0', gpus: 8, gpu_type: 'test' }],
      gpu_types: { test: { memory_gb: 100 } },
    },
    training: { ...doc.training, memory_share: 0.3 },
  });
}

const launchers: InProcessSimLauncher[] = [];
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
});

describe('the coordinator executes the memory plan by tag', { timeout: 120_000 }, () => {
  it('each phase holds exactly the tags the plan keeps, never more than a GPU holds, over two RL steps', async () => {
    const config = sizedDefer();
    const planned = planPlacement(config);
    if (!planned.ok) throw new Error(JSON.stringify(planned.errors));
    const memory = planned.plan.memory?.[0];
    expect(memory?.unsized).toEqual([]);
    const launcher = new InProcessSimLauncher({ simOnloadMs: 0, simOffloadMs: 0 });
    launchers.push(launcher);
    const plane = await createControlPlane({ config, launcher });
    const crashed: string[] = [];
    const engines = planned.plan.placements.flatMap((p) =>
      p.replicas.map((r) => ({ model: p.model, id: r.engine_id })),
    );
    const check = (phase: string) => {
      const want = memory?.configured.phases.find((p) => p.name === phase)?.resident_tags ?? {};
      for (const e of engines) {
        const state = launcher.serversOf(e.id)[0]?.state();
        if (state?.status === 'crashed') crashed.push(e.id);
        const held = RESUME_ORDER.filter((t) => state?.memory[t] === 'resident');
        expect(held, `${e.id} in ${phase}`).toEqual(want[e.model] ?? []);
      }
      for (let gpu = 0; gpu < 8; gpu++) expect(PROCESS_GPUS.used(`node-0:${gpu}`)).toBeLessThanOrEqual(100e9);
    };
    try {
      for (let step = 0; step < 2; step++) {
        if (step > 0) await plane.coordinator.transition({ group: 'actor', to: 'rollout', actor: 'test' });
        check('rollout');
        // rollout -> genrm_score -> teacher_score (scorer phases advance by themselves) -> train
        const result = await plane.coordinator.transition({ group: 'actor', actor: 'test' });
        expect(result.path).toEqual(['genrm_score', 'teacher_score', 'train']);
        check('train');
      }
      expect(crashed).toEqual([]);
    } finally {
      await plane.stop();
    }
  });
});
