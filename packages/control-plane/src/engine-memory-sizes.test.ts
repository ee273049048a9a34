import type { InferenceManager } from '@uis/manager';
import { deferConfig } from '@uis/manager/testing';
import { memorySizes, SGLangClient } from '@uis/sglang-engine';
import { startSimServer } from '@uis/sglang-sim';
import { parseConfig, silentLogger, type UisConfig } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { planOf } from './create-control-plane.ts';
import { memoryFromEngines } from './engine-memory-sizes.ts';

/** The defer layout on 8 GPUs of 100 GB with policy and teacher sized (as memory-switches.test.ts), the judge with
 * `judge` as its memory section or none. */
function defer(judge: Record<string, number> | null): UisConfig {
  const doc = deferConfig() as ReturnType<typeof deferConfig> & Record<string, unknown>;
  const weights: Record<string, number> = { policy: 40, teacher: 320 };
  for (const role of Object.values(doc.roles))
    for (const m of role.models as Array<Record<string, unknown>>) {
      if (m.name !== 'judge')
        m.memory = { weight_gb: weights[m.name as string], kv_cache_share: 0.2, cuda_graph_gb: 1 };
      else if (judge !== null) m.memory = judge;
    }
  return parseConfig({
    ...doc,
    cluster: {
      nodes: [{ name: 'node-0', gpus: 8, gpu_type: 'test' }],
      gpu_types: { test: { memory_gb: 100 } },
    },
    training: { ...doc.training, memory_share: 0.3 },
  });
}

describe('sizing a model from its running engine (SGLang memory_usage)', () => {
  it.each(['0.5.10.post1', '0.5.23'])(
    'a judge without a memory section is sized as loaded: the plan it would have with one (engine on SGLang %s)',
    async (version) => {
      // The judge's engine as loaded: 120 GB over tp4 = 30 GB of weights, 20 GB of KV cache, 1 GB of CUDA graphs per
      // GPU, reported in GiB (graphs one number before 0.5.17, per captured phase from it).
      const engine = await startSimServer({
        tpSize: 4,
        simWeightGb: 120,
        simKvCacheShare: 0.2,
        simCudaGraphGb: 1,
        simGpuMemoryGb: 100,
        simSglangVersion: version,
      });
      try {
        const client = new SGLangClient(engine.url);
        const sizes = memorySizes(await client.serverInfo());
        await client.close();
        expect(sizes?.weights).toBeCloseTo(30e9, -7);
        expect(sizes?.kv_cache).toBeCloseTo(20e9, -7);
        expect(sizes?.cuda_graph).toBeCloseTo(1e9, -7);

        const config = defer(null);
        const plan = planOf(config);
        expect(plan.memory?.[0]?.unsized).toEqual(['judge']);
        const manager = {
          registry: { snapshot: () => ({ models: { judge: { engines: [{ base_url: engine.url }] } } }) },
        } as unknown as InferenceManager;
        const sized = await memoryFromEngines(
          config,
          plan,
          new Map([['genrm', manager]]),
          silentLogger,
          planOf,
        );
        // Exactly the plan of a config that gives the judge what its engine loaded (x 4 GPUs per engine, the KV
        // cache's share of a 100 GB GPU): the judge moves by tag now, like every sized model.
        const judge = {
          weight_gb: ((sizes?.weights ?? 0) * 4) / 1e9,
          kv_cache_share: (sizes?.kv_cache ?? 0) / 100e9,
          cuda_graph_gb: (sizes?.cuda_graph ?? 0) / 1e9,
        };
        expect(sized).toEqual(planOf(defer(judge)).memory);
        expect(sized?.[0]?.unsized).toEqual([]);
        expect(sized?.[0]?.configured.switches.some((x) => x.moves.some((m) => m.model === 'judge'))).toBe(
          true,
        );
      } finally {
        await engine.close();
      }
    },
  );

  it('leaves the plan as it is when every model is sized, or no engine reports sizes', async () => {
    const sizedPlan = planOf(defer({ weight_gb: 120, kv_cache_share: 0.2, cuda_graph_gb: 1 }));
    expect(
      await memoryFromEngines(
        defer({ weight_gb: 120, kv_cache_share: 0.2, cuda_graph_gb: 1 }),
        sizedPlan,
        new Map(),
        silentLogger,
        planOf,
      ),
    ).toBeNull();
    const engine = await startSimServer({ tpSize: 4 });
    try {
      const manager = {
        registry: { snapshot: () => ({ models: { judge: { engines: [{ base_url: engine.url }] } } }) },
      } as unknown as InferenceManager;
      const config = defer(null);
      expect(
        await memoryFromEngines(config, planOf(config), new Map([['genrm', manager]]), silentLogger, planOf),
      ).toBeNull();
    } finally {
      await engine.close();
    }
  });
});
