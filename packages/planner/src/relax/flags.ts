import type { FlagKind, FlagTable } from './argparse.ts';

/** The Relax flags the adapter reads, with the argparse action Relax declares for each (relax/utils/arguments.py,
 * relax/utils/opd/opd_utils.py). Only `--offload-train` and `--offload-rollout` are BooleanOptionalAction there;
 * the other switches are store_true. */
const FLAGS: Array<[string, FlagKind]> = [
  // Placement and mode.
  ['resource', 'value'],
  ['colocate', 'store_true'],
  ['fully-async', 'store_true'],
  ['hybrid', 'store_true'],
  ['offload', 'store_true'],
  ['offload-train', 'boolean_optional'],
  ['offload-rollout', 'boolean_optional'],
  ['num-gpus-per-node', 'value'],
  ['debug-rollout-only', 'store_true'],
  ['debug-train-only', 'store_true'],
  // Training flags that decide which training roles Relax places (relax/core/service_plan.py).
  ['advantage-estimator', 'value'],
  ['loss-type', 'value'],
  ['use-kl-loss', 'store_true'],
  ['kl-coef', 'value'],
  ['true-on-policy-mode', 'store_true'],
  // Rollout.
  ['hf-checkpoint', 'value'],
  ['rollout-num-gpus', 'value'],
  ['rollout-num-gpus-per-engine', 'value'],
  ['sglang-config', 'value'],
  ['prefill-num-servers', 'value'],
  ['rollout-external', 'store_true'],
  ['rollout-external-engine-addrs', 'list'],
  ['sglang-router-ip', 'value'],
  ['sglang-router-port', 'value'],
  ['sglang-router-policy', 'value'],
  ['sglang-router-request-timeout-secs', 'value'],
  // GenRM.
  ['genrm-model-path', 'value'],
  ['genrm-num-gpus', 'value'],
  ['genrm-num-gpus-per-engine', 'value'],
  ['genrm-engine-config', 'value'],
  ['genrm-sampling-config', 'value'],
  ['genrm-instances', 'value'],
  ['defer-reward-to-post-process', 'store_true'],
  // Teacher / OPD.
  ['use-opd', 'store_true'],
  ['opd-type', 'value'],
  ['teacher-hf-checkpoint', 'value'],
  ['teacher-num-gpus-per-engine', 'value'],
  ['opd-teacher-routes', 'value'],
  ['opd-teacher-key', 'value'],
  ['opd-teacher-url', 'value'],
  ['inference-defer-roles', 'list'],
];

export const RELAX_FLAGS: FlagTable = {
  flags: new Map(FLAGS),
  families: ['sglang-', 'teacher-sglang-'],
};
