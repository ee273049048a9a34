import { z } from 'zod';

/** The console's time series and GPU-time views, as the gateway's tRPC `timeSeries` and `gpuTime` deliver them.
 * Times are epoch milliseconds; rates are per second. */

/** One second of one role+model's serving. Latency and TTFT percentiles are over the trailing 10 s (null when
 * nothing finished in them); `errors` counts answers with status >= 400 (0: the client left) by status. */
export const TimeSeriesPointSchema = z.object({
  t: z.number(),
  requests_per_s: z.number().nonnegative(),
  tokens_per_s: z.number().nonnegative(),
  latency_p50_ms: z.number().nullable(),
  latency_p99_ms: z.number().nullable(),
  ttft_p50_ms: z.number().nullable(),
  ttft_p99_ms: z.number().nullable(),
  errors: z.record(z.string(), z.number().nonnegative()),
});
export type TimeSeriesPoint = z.infer<typeof TimeSeriesPointSchema>;

export const TimeSeriesSchema = z.object({
  role: z.string(),
  model: z.string(),
  points: z.array(TimeSeriesPointSchema),
});
export type TimeSeries = z.infer<typeof TimeSeriesSchema>;

/** A push of the time-series subscription: the whole window first (`full`), then the seconds completed since. */
export const TimeSeriesUpdateSchema = z.object({
  full: z.boolean(),
  window_s: z.number().int().positive(),
  series: z.array(TimeSeriesSchema),
});
export type TimeSeriesUpdate = z.infer<typeof TimeSeriesUpdateSchema>;

/** Where a step's GPU time went. `work` is a phase's residents serving or training; the rest are the bubbles of
 * colocation: releasing memory, onloading it, syncing weights, waiting at a barrier; `batch_run` is scoring work. */
export const GPU_TIME_PARTS = [
  'work',
  'batch_run',
  'release',
  'onload',
  'weight_sync',
  'barrier_wait',
  'other',
] as const;
export const GpuTimePartSchema = z.enum(GPU_TIME_PARTS);
export type GpuTimePart = z.infer<typeof GpuTimePartSchema>;

export const GpuSegmentSchema = z.object({
  from: z.number(),
  to: z.number(),
  part: GpuTimePartSchema,
  /** Who held the GPU: the phase and its resident roles (`train` holds it for the trainer). */
  phase: z.string().nullable(),
  holder: z.string(),
});
export type GpuSegment = z.infer<typeof GpuSegmentSchema>;

export const GpuStepSchema = z.object({
  step: z.number().int().positive(),
  from: z.number(),
  to: z.number(),
  /** GPU-seconds per part over the group's bundles, and each part's share of the step's GPU time. */
  gpu_seconds: z.record(GpuTimePartSchema, z.number().nonnegative()),
  shares: z.record(GpuTimePartSchema, z.number().nonnegative()),
  /** The Gantt: per bundle index, who held it when. */
  bundles: z.array(z.object({ bundle: z.number().int().nonnegative(), segments: z.array(GpuSegmentSchema) })),
});
export type GpuStep = z.infer<typeof GpuStepSchema>;

/** What the planner's memory model predicts for a group's step, and what each decision saves against releasing
 * everything at every switch. */
export const GpuTimePredictionSchema = z.object({
  order: z.enum(['configured', 'optimized']),
  /** Predicted switch seconds per step (the order in use), and with every switch releasing everything. */
  bubble_s: z.number().nonnegative(),
  release_all_bubble_s: z.number().nonnegative(),
  /** The configured order's, when the optimized one is in use (what the order saved). */
  configured_bubble_s: z.number().nonnegative(),
  switches: z.array(
    z.object({
      from: z.string(),
      to: z.string(),
      predicted_s: z.number().nonnegative(),
      release_all_s: z.number().nonnegative(),
      /** Tags a release-everything switch would move that this one leaves in place, per model. */
      kept: z.array(z.string()),
    }),
  ),
});
export type GpuTimePrediction = z.infer<typeof GpuTimePredictionSchema>;

export const GpuTimeGroupSchema = z.object({
  group: z.string(),
  first_phase: z.string(),
  steps: z.array(GpuStepSchema),
  /** Absent when the group's models are not all sized. */
  predicted: GpuTimePredictionSchema.optional(),
});
export const GpuTimeReportSchema = z.object({ groups: z.array(GpuTimeGroupSchema) });
export type GpuTimeReport = z.infer<typeof GpuTimeReportSchema>;
