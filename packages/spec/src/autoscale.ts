import { z } from 'zod';

/**
 * A model's built-in autoscaler (`autoscale:` in its config; off without the block). Each interval it reads every
 * serving replica's SGLang `/metrics` and scales the model between `min_replicas` and `max_replicas` (absolute
 * targets, like Relax's): out when any threshold is crossed (waiting requests per replica, mean KV use, P95 queue
 * time), in by one replica when nothing waits and the KV use is low; no decision within `cooldown_s` of one that
 * acted. The thresholds' defaults are Relax's (its autoscaler.yaml).
 */
export const AutoscaleSpecSchema = z
  .object({
    /** Fewest replicas: never below the plan's own (they are not scaled in without force). */
    min_replicas: z.number().int().positive(),
    /** Most replicas: at most the plan's own plus the ones its placeholder groups reserve room for. */
    max_replicas: z.number().int().positive(),
    /** Scale out when the engines' waiting requests exceed this many per replica (`sglang:num_queue_reqs`). */
    queue_per_replica: z.number().nonnegative().default(10),
    /** Scale out when the mean KV use is above this (`sglang:token_usage`). */
    token_usage_high: z.number().gt(0).max(1).default(0.85),
    /** Scale in (one replica) when the mean KV use is below this and nothing waits. */
    token_usage_low: z.number().min(0).lt(1).default(0.3),
    /** Scale out when the P95 queue time of the requests queued since the last reading is above this many seconds
     * (`sglang:queue_time_seconds`; past its last bucket counts as above). */
    queue_time_p95_s: z.number().positive().default(5),
    /** No decision acts within this long of the last one that did. */
    cooldown_s: z.number().nonnegative().default(60),
    /** How often the metrics are read and a decision made. */
    interval_s: z.number().positive().default(10),
  })
  .strict()
  .superRefine((a, ctx) => {
    if (a.min_replicas > a.max_replicas)
      ctx.addIssue({
        code: 'custom',
        path: ['max_replicas'],
        message: `max_replicas ${a.max_replicas} is below min_replicas ${a.min_replicas}`,
      });
    if (a.token_usage_low >= a.token_usage_high)
      ctx.addIssue({
        code: 'custom',
        path: ['token_usage_low'],
        message: `token_usage_low ${a.token_usage_low} must be below token_usage_high ${a.token_usage_high}`,
      });
  });
export type AutoscaleSpec = z.infer<typeof AutoscaleSpecSchema>;
