import type { EngineGroupSpec, ServerArgValue, WorkerType } from '@uis/spec';
import { z } from 'zod';

export const ServerArgsSchema = z.record(
  z.string(),
  z.union([z.string(), z.number(), z.boolean(), z.null()]),
);

export interface ParallelDefaults {
  pp?: number;
  dp?: number;
  dpAttention?: boolean;
  /** GenRM: Relax starts its engines with tp = GPUs per engine. */
  tpIsEngine?: boolean;
}

/** One engine group; its parallelism comes from the server args Relax reads (tp_size, pp_size, dp_size, ...),
 * which are taken out of the pass-through args. */
export function engineGroup(
  worker_type: WorkerType,
  num_gpus: number,
  gpus_per_engine: number,
  args: Record<string, ServerArgValue>,
  defaults: ParallelDefaults = {},
): EngineGroupSpec {
  const { tp_size, pp_size, dp_size, ep_size, enable_dp_attention, ...server_args } = args;
  const num = (v: ServerArgValue | undefined, d: number) => (typeof v === 'number' ? v : d);
  const pp = num(pp_size, defaults.pp ?? 1);
  return {
    worker_type,
    num_gpus,
    gpus_per_engine,
    tp: num(tp_size, defaults.tpIsEngine ? gpus_per_engine : Math.max(1, Math.floor(gpus_per_engine / pp))),
    pp,
    dp: num(dp_size, defaults.dp ?? 1),
    ep: num(ep_size, 1),
    enable_dp_attention:
      enable_dp_attention === undefined ? (defaults.dpAttention ?? false) : enable_dp_attention === true,
    server_args,
  };
}

/** A Relax name (`--sglang-config` model, GenRM instance, teacher route key) as a UIS model name. */
export const modelName = (key: string) =>
  key.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '') || 'default';
