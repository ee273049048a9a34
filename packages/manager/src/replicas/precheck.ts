import { UisError } from '@uis/spec';
import { errorMessage } from '../runtime.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { ModelRuntime, Slot } from './types.ts';

/** Deadline of each precheck call. */
const CALL_MS = 30_000;

/**
 * The fail-closed precheck a scaled-out replica passes before it may join: it answers /health, serves the model's
 * path, generates one token, and its SGLang release can do what the model needs of it (the drain policy, and the
 * weight update its model replays). The weight version is checked after the sync (`versionOk`). Throws
 * `scale_failed` naming every check that failed.
 */
export async function precheckReplica(
  replicas: ReplicaTable,
  s: Slot,
  m: ModelRuntime,
  drainPolicy: Parameters<NonNullable<Slot['engine']>['checkDrain']>[0],
  signal?: AbortSignal,
): Promise<void> {
  const engine = replicas.engineOf(s);
  const call = { timeoutMs: CALL_MS, ...(signal ? { signal } : {}) };
  const failed: string[] = [];
  const check = async (what: string, f: () => Promise<string | null> | string | null) => {
    try {
      const why = await f();
      if (why !== null) failed.push(`${what}: ${why}`);
    } catch (e) {
      failed.push(`${what}: ${errorMessage(e)}`);
    }
  };
  await check('health', async () => ((await engine.client.health(call)) ? null : '/health is not 200'));
  await check('model path', async () => {
    const info = await engine.client.modelInfo(call);
    return info.model_path === m.spec.model_path
      ? null
      : `serves ${info.model_path}, the model is ${m.spec.model_path}`;
  });
  await check('one-token generation', async () => {
    const out = await engine.client.generate(
      { text: 'ping', sampling_params: { max_new_tokens: 1, temperature: 0 } },
      call,
    );
    return typeof out === 'object' && out !== null ? null : 'no answer';
  });
  await check('SGLang release', () => {
    engine.checkDrain(drainPolicy);
    if (m.replay) engine.checkWeightUpdate(m.replay.source);
    return null;
  });
  if (failed.length > 0)
    throw new UisError({
      code: 'scale_failed',
      path: s.engineId,
      message: `${s.engineId} failed its precheck: ${failed.join('; ')}`,
    });
}
