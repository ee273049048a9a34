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
  const rendezvous = nnodes > 1 ? 1 : 0;
  // A prefill worker's bootstrap port: SGLang's default 8998 would collide between two on one host.
  const prefill = replica.worker_type === 'prefill' ? 1 : 0;
  const ports = await freePorts(nnodes + rendezvous + prefill, opts.host);
  return buildServerArgs(model, group, replica, {
    ...opts,
    port: ports[0] as number,
    nodePorts: ports.slice(0, nnodes),
    ...(rendezvous ? { distInitAddr: `${opts.host}:${ports[nnodes]}` } : {}),
    ...(prefill ? { bootstrapPort: ports[nnodes + rendezvous] as number } : {}),
  });
}
