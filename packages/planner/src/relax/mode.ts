import type { ConfigRoleInput, Role } from '@uis/spec';
import { z } from 'zod';
import type { FlagReader } from './reader.ts';

/** How the job runs, read the way Relax's argument validation derives it (relax/utils/arguments.py). */
export interface RelaxMode {
  colocate: boolean;
  hybrid: boolean;
  fullyAsync: boolean;
  debugTrainOnly: boolean;
  debugRolloutOnly: boolean;
  /** Relax: giving engine addresses is what makes the rollout external. */
  rolloutExternal: boolean;
  offloadTrain: boolean;
  offloadRollout: boolean;
  deferred: ReadonlySet<string>;
  perNode: number;
  /** `--resource` GPUs per role (`[num_serves, num_gpus]` -> num_gpus). */
  resource: Readonly<Record<string, number>>;
}

const ResourceSchema = z.record(
  z.string(),
  z.tuple([z.literal(1, 'only one service replica per role is supported'), z.number().int().nonnegative()]),
);

function readResource(flags: FlagReader): Record<string, number> {
  const resource: Record<string, number> = {};
  if (!flags.has('resource')) {
    flags.add(
      'resource',
      '--resource is required, e.g. \'{"actor": [1, 8], "rollout": [1, 8]}\'',
      'missing_flag',
    );
    return resource;
  }
  const parsed = flags.parsed('resource', ResourceSchema);
  for (const [role, [, gpus]] of Object.entries(parsed ?? {})) resource[role] = gpus;
  return resource;
}

function readDeferred(flags: FlagReader, colocate: boolean): Set<string> {
  const deferred = new Set((flags.list('inference-defer-roles') ?? []).flatMap((v) => v.split(',')));
  deferred.delete('');
  if (flags.bool('defer-reward-to-post-process')) deferred.add('genrm');
  for (const role of deferred) {
    if (role !== 'genrm' && role !== 'teacher') {
      flags.add(
        'inference-defer-roles',
        `only genrm and teacher can be deferred, not "${role}"`,
        'defer_role_not_allowed',
      );
    }
  }
  if (deferred.size > 0 && !colocate) {
    flags.add(
      'inference-defer-roles',
      'deferred inference needs colocated synchronous placement: add --colocate and drop --fully-async/--hybrid',
      'contradictory_flags',
    );
  }
  return deferred;
}

export function readMode(flags: FlagReader): RelaxMode {
  const perNode = flags.int('num-gpus-per-node') ?? 8;
  const resource = readResource(flags);
  const hybrid = flags.bool('hybrid');
  const fullyAsync = flags.bool('fully-async');
  const debugTrainOnly = flags.bool('debug-train-only');
  const debugRolloutOnly = flags.bool('debug-rollout-only');
  let colocate = flags.bool('colocate') && !hybrid;
  if (colocate && fullyAsync)
    flags.add('fully-async', '--fully-async with --colocate needs --hybrid', 'contradictory_flags');
  const rolloutExternal = flags.bool('rollout-external') || flags.has('rollout-external-engine-addrs');
  if (rolloutExternal && colocate) {
    flags.add(
      'rollout-external',
      'an external rollout cannot share GPUs; drop --colocate',
      'contradictory_flags',
    );
  }
  if (debugRolloutOnly && debugTrainOnly) {
    flags.add(
      'debug-train-only',
      '--debug-rollout-only and --debug-train-only exclude each other',
      'contradictory_flags',
    );
  }
  // Relax: --offload turns both sides on; otherwise an explicit --[no-]offload-* wins, and colocate turns an
  // unset one on. --debug-rollout-only runs no training: nothing is colocated and nothing offloads.
  if (debugRolloutOnly) colocate = false;
  const offloadAll = flags.bool('offload');
  const side = (name: string) => !debugRolloutOnly && (offloadAll || (flags.switch(name) ?? colocate));
  return {
    colocate,
    hybrid,
    fullyAsync,
    debugTrainOnly,
    debugRolloutOnly,
    rolloutExternal,
    offloadTrain: side('offload-train'),
    offloadRollout: side('offload-rollout'),
    deferred: readDeferred(flags, colocate),
    perNode,
    resource,
  };
}

/** A managed inference role's deployment: a slice (or a phase) of the actor PG under colocate, else its own. */
export function deploymentOf(mode: RelaxMode, role: Role): ConfigRoleInput['deployment'] {
  if (!mode.colocate) return { mode: 'decoupled', offload: false };
  return {
    mode: mode.deferred.has(role) ? 'colocated_defer' : 'colocated_split',
    offload: mode.offloadRollout,
  };
}
