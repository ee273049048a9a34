import { execFileSync } from 'node:child_process';
import { EngineGroupSpecSchema, InferenceModelSpecSchema } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { SGLangEngine } from './engine.ts';
import { LocalProcessLauncher } from './launcher.ts';
import { freePort } from './ports.ts';
import { buildServerArgs } from './server-args.ts';
import { alive, simReplica } from './testing.ts';

/** Smoke test of the local launcher, sleep/wake and a weight update on the real SGLang. Needs a GPU, an importable
 * `sglang` and a small model in UIS_SGLANG_TEST_MODEL; otherwise it is skipped with the reason printed. */
const PYTHON = process.env.UIS_PYTHON ?? 'python';
const MODEL = process.env.UIS_SGLANG_TEST_MODEL;

function missing(): string | undefined {
  try {
    execFileSync('nvidia-smi', ['-L'], { stdio: 'ignore', timeout: 10_000 });
  } catch {
    return 'no NVIDIA GPU (nvidia-smi -L failed)';
  }
  try {
    execFileSync(PYTHON, ['-c', 'import sglang'], { stdio: 'ignore', timeout: 60_000 });
  } catch {
    return `sglang is not importable by ${PYTHON}`;
  }
  if (!MODEL) return 'UIS_SGLANG_TEST_MODEL (a small HF model path) is not set';
  return undefined;
}

const reason = missing();
if (reason) console.log(`[sglang-engine] skipping the real-SGLang smoke test: ${reason}`);

describe.skipIf(reason !== undefined)('real SGLang on one GPU', () => {
  it('launches, generates, sleeps, wakes, reloads weights and shuts down', async () => {
    const model = InferenceModelSpecSchema.parse({
      name: 'smoke',
      model_path: MODEL,
      engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }],
      weight_source: 'disk',
    });
    const group = EngineGroupSpecSchema.parse({
      num_gpus: 1,
      gpus_per_engine: 1,
      server_args: { mem_fraction_static: 0.5 },
    });
    const args = buildServerArgs(model, group, simReplica(1, 1), {
      host: '127.0.0.1',
      port: await freePort(),
      offload: true,
      command: [PYTHON, '-m', 'sglang.launch_server'],
    });
    const engine = new SGLangEngine({
      engineId: 'smoke/0',
      baseUrl: args.headUrl,
      launcher: new LocalProcessLauncher(),
      launchSpec: { ...args, engineId: 'smoke/0' },
      pollMs: 1000,
    });
    try {
      await engine.start({ deadlineMs: 600_000 });
      const out = await engine.client.generate({ text: 'Hello', sampling_params: { max_new_tokens: 4 } });
      expect(out.meta_info.completion_tokens).toBeGreaterThan(0);
      await engine.sleep();
      await engine.wake(['weights']);
      await engine.updateWeights({ source: 'disk', modelPath: MODEL!, weightVersion: 'smoke-2' });
      await engine.wake(['kv_cache', 'cuda_graph']);
      expect(await engine.weightVersion()).toBe('smoke-2');
      const again = await engine.client.generate({ text: 'Hello', sampling_params: { max_new_tokens: 4 } });
      expect(again.meta_info.completion_tokens).toBeGreaterThan(0);
    } finally {
      const pids = engine.pids();
      await engine.shutdown(30_000);
      expect(pids.filter(alive)).toEqual([]);
    }
  }, 900_000);
});
