import type { InferenceManager, ScaleInRequest, ScaleOutRequest } from '@uis/manager';
import { ScalePartialPolicySchema, UisError } from '@uis/spec';
import { z } from 'zod';

/** A scale-out as Relax's rollout service takes it: an absolute target (`num_replicas` > 0) or engines to attach
 * (`engine_urls`); `timeout_secs` bounds the whole operation; `partial_success_policy` is Relax's
 * `--scale-out-partial-success-policy`, per request here (default `rollback_all`, as Relax's). */
export const ScaleOutInputSchema = z.strictObject({
  model_name: z.string().min(1).optional(),
  num_replicas: z.number().int().nonnegative().default(0),
  engine_urls: z.array(z.string().min(1)).optional(),
  timeout_secs: z.number().positive().nullable().optional(),
  partial_success_policy: ScalePartialPolicySchema.default('rollback_all'),
});
export type ScaleOutInput = z.input<typeof ScaleOutInputSchema>;

/** A scale-in as Relax takes it: a count to keep or the engines to remove; `force` may remove the plan's own
 * replicas and skips the drain wait; `timeout_secs` is the drain's deadline; `dry_run` only answers the victims. */
export const ScaleInInputSchema = z.strictObject({
  model_name: z.string().min(1).optional(),
  num_replicas: z.number().int().nonnegative().default(0),
  engine_urls: z.array(z.string().min(1)).optional(),
  force: z.boolean().default(false),
  dry_run: z.boolean().default(false),
  timeout_secs: z.number().positive().nullable().optional(),
});
export type ScaleInInput = z.input<typeof ScaleInInputSchema>;

/** The model a scale names: `model_name` (Relax's default `"default"`, or none, is the role's default model). */
export function scaleModel(manager: InferenceManager, name: string | undefined): string {
  const models = manager.spec.models.map((m) => m.name);
  if (name !== undefined && models.includes(name)) return name;
  if (name === undefined || name === 'default') {
    const d = manager.spec.routing.default_model ?? (models.length === 1 ? models[0] : undefined);
    if (d !== undefined) return d;
  }
  throw new UisError({
    code: 'unknown_model',
    path: 'model_name',
    message: `role ${manager.role} has no model ${JSON.stringify(name ?? 'default')}; models: ${models.join(', ')}`,
  });
}

/** `num_replicas` wins when > 0 (Relax's rule), else the URLs; neither is a 400. */
export function scaleTarget(
  input: { num_replicas: number; engine_urls?: string[] | undefined },
  kind: 'scale_out' | 'scale_in',
): ScaleOutRequest {
  if (input.num_replicas > 0) return { target: input.num_replicas };
  const urls = input.engine_urls ?? [];
  if (urls.length > 0) return { urls: urls.map((u) => u.replace(/\/+$/, '')) };
  throw new UisError({
    code: 'invalid_replicas',
    path: 'num_replicas',
    message: `a ${kind.replace('_', '-')} needs num_replicas > 0 (the absolute target) or engine_urls`,
  });
}

export function scaleInRequest(input: z.infer<typeof ScaleInInputSchema>): ScaleInRequest {
  return { ...scaleTarget(input, 'scale_in'), force: input.force };
}
