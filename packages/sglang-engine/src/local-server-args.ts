import type { EngineGroupSpec, InferenceModelSpec, ReplicaPlacement } from '@uis/spec';
import { freePorts } from './ports.ts';
import { buildServerArgs, type ServerArgsOptions, type ServerArgsResult } from './server-args.ts';

/** Server args of a replica whose node processes all run on this host: each node gets its own free port (they
 * share one machine) and a multi-node replica a free rendezvous port. */
export async function localServerArgs(
  model: InferenceModelSpec,
  group: EngineGroupSpec,
  replica: ReplicaPlacement,
  opts: Omit<ServerArgsOptions, 'port' | 'nodePorts' | 'distInitAddr'>,
): Promise<ServerArgsResult> {
  const nnodes = replica.nnodes;
  const ports = await freePorts(nnodes + (nnodes > 1 ? 1 : 0), opts.host);
  return buildServerArgs(model, group, replica, {
    ...opts,
    port: ports[0] as number,
    nodePorts: ports.slice(0, nnodes),
    ...(nnodes > 1 ? { distInitAddr: `${opts.host}:${ports[nnodes]}` } : {}),
  });
}
