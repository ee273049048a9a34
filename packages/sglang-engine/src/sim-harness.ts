/** Test support (not exported): runs sglang-sim processes through the real launch path. The simulator is spawned
 * by path rather than imported, because it depends on this package (protocol.ts). */
import { fileURLToPath } from 'node:url';
import {
  EngineGroupSpecSchema,
  InferenceModelSpecSchema,
  type NodePlacement,
  type ReplicaPlacement,
} from '@uis/spec';
import type { Clock } from './clock.ts';
import { SGLangEngine } from './engine.ts';
import { EngineError } from './engine-error.ts';
import { LocalProcessLauncher } from './launcher.ts';
import { localServerArgs } from './local-server-args.ts';

export const SIM_BIN = fileURLToPath(new URL('../../sglang-sim/bin/sglang-sim.mjs', import.meta.url));

export interface SimEngineOptions {
  /** Extra simulator flags (`--sim-crash-after`, `--sim-decode-us-per-token` ...). */
  simFlags?: string[];
  nnodes?: number;
  gpusPerNode?: number;
  offload?: boolean;
  weightSource?: 'static' | 'disk' | 'dcs';
  serverArgs?: Record<string, string | number | boolean | null>;
  /** The engine's clock (start deadline, poll interval, drain deadline); a ManualClock to drive them. */
  clock?: Clock;
}

export function simReplica(nnodes: number, gpusPerNode: number): ReplicaPlacement {
  const nodes: NodePlacement[] = Array.from({ length: nnodes }, (_, rank) => ({
    node: `node-${rank}`,
    node_rank: rank,
    bundle_indices: Array.from({ length: gpusPerNode }, (_, i) => rank * gpusPerNode + i),
    gpu_ids: Array.from({ length: gpusPerNode }, (_, i) => i),
    base_gpu_id: 0,
    gpu_id_step: 1,
  }));
  return { engine_id: 'sim-model/0', replica: 0, group: 0, worker_type: 'regular', nnodes, nodes };
}

/** Builds the server args of a sim replica and an SGLangEngine that launches it locally. */
export async function simEngine(opts: SimEngineOptions = {}): Promise<SGLangEngine> {
  const nnodes = opts.nnodes ?? 1;
  const gpusPerNode = opts.gpusPerNode ?? 2;
  const model = InferenceModelSpecSchema.parse({
    name: 'sim-model',
    model_path: 'sim/tiny-model',
    engine_groups: [{ num_gpus: nnodes * gpusPerNode, gpus_per_engine: nnodes * gpusPerNode }],
    weight_source: opts.weightSource ?? 'disk',
  });
  const group = EngineGroupSpecSchema.parse({
    num_gpus: nnodes * gpusPerNode,
    gpus_per_engine: nnodes * gpusPerNode,
    server_args: opts.serverArgs ?? {},
  });
  const args = await localServerArgs(model, group, simReplica(nnodes, gpusPerNode), {
    host: '127.0.0.1',
    offload: opts.offload ?? true,
    command: [process.execPath, SIM_BIN, ...(opts.simFlags ?? [])],
  });
  return new SGLangEngine({
    engineId: 'sim-model/0',
    baseUrl: args.headUrl,
    launcher: new LocalProcessLauncher(),
    launchSpec: { ...args, engineId: 'sim-model/0' },
    pollMs: 100,
    ...(opts.clock ? { clock: opts.clock } : {}),
  });
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function waitUntil(cond: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The error `p` rejects with, which must be a `type` (an EngineError unless told); resolving fails the test. */
export function failure(p: Promise<unknown>): Promise<EngineError>;
export function failure<T extends Error>(p: Promise<unknown>, type: new (...a: never[]) => T): Promise<T>;
export async function failure(
  p: Promise<unknown>,
  type: new (...a: never[]) => Error = EngineError,
): Promise<Error> {
  const e = await p.then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err,
  );
  if (!(e instanceof type)) throw new Error(`expected a ${type.name}, got ${String(e)}`);
  return e;
}
