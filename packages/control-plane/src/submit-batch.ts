import { type BatchInfo, GenrmInputSchema, SubmitSamplesSchema, TeacherInputSchema } from '@uis/manager';
import { type BatchKind, parseOrThrow, scorerOf, UisError } from '@uis/spec';
import type { ControlPlane } from './control-plane.ts';

const INPUT_SCHEMA = { genrm_score: GenrmInputSchema, teacher_logprobs: TeacherInputSchema } as const;

/** Everything a batch needs before it exists: a configured scorer role, a model of it, valid samples with
 * distinct ids. A batch that could never run would otherwise block its scorer phase (the runner stops the phase at
 * the first failed batch), and a refused one would linger as a failed batch. */
function checkBatch(plane: ControlPlane, kind: BatchKind, model: string | null, samples: unknown[]): void {
  const role = scorerOf(kind);
  const manager = plane.managers.get(role);
  if (!manager)
    throw new UisError({
      code: 'unknown_role',
      path: 'kind',
      message: `${kind} batches are scored by the ${role} role, which is not configured; roles: ${[...plane.managers.keys()].join(', ')}`,
    });
  const models = Object.keys(manager.registry.snapshot().models);
  if (model !== null && !models.includes(model))
    throw new UisError({
      code: 'unknown_model',
      path: 'model',
      message: `the ${role} role has no model ${JSON.stringify(model)}; models: ${models.join(', ')}`,
    });
  const parsed = parseOrThrow(SubmitSamplesSchema, { samples }, '', 'invalid_samples');
  const seen = new Map<string, number>();
  parsed.samples.forEach((s, i) => {
    parseOrThrow(INPUT_SCHEMA[kind], s.input, `samples[${i}].input`, 'invalid_samples');
    const first = seen.get(s.sample_id);
    if (first !== undefined)
      throw new UisError({
        code: 'duplicate_sample',
        path: `samples[${i}].sample_id`,
        message: `sample_id ${JSON.stringify(s.sample_id)} is also samples[${first}]; sample ids must be unique`,
      });
    seen.set(s.sample_id, i);
  });
}

/** Creates, fills and seals a batch in one call; a role without a defer schedule scores it at once. */
export function submitBatch(
  plane: ControlPlane,
  kind: BatchKind,
  model: string | null,
  samples: unknown[],
): BatchInfo {
  checkBatch(plane, kind, model, samples);
  const created = plane.store.create({ kind, model });
  try {
    plane.store.addSamples(created.id, { samples });
    const sealed = plane.store.seal(created.id);
    plane.runWhenSealed(created.id);
    return sealed;
  } catch (e) {
    plane.store.fail(created.id, e instanceof Error ? e.message : String(e));
    throw e;
  }
}
