/** Test helpers (`@uis/sglang-engine/testing`): bad engine answers, the fake clock, the one `waitFor`, and sglang-sim
 * processes run through the real launch path (spawned by path rather than imported: sglang-sim depends on this
 * package). */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import {
  type Clock,
  EngineGroupSpecSchema,
  InferenceModelSpecSchema,
  type NodePlacement,
  type ReplicaPlacement,
} from '@uis/spec';
import { SGLangEngine } from './engine.ts';
import { EngineError } from './engine-error.ts';
import { LocalProcessLauncher } from './launcher.ts';
import { localServerArgs } from './local-server-args.ts';

export { ManualClock } from './manual-clock.ts';
export { waitFor } from './wait-for.ts';

/** One way an engine (or a proxy in front of it) answers badly, as a node:http handler. */
export type EngineFault = (req: IncomingMessage, res: ServerResponse) => void;

/** An engine that answers `status` with `body` of `type`. */
export const engineReply =
  (status: number, type: string, body: string): EngineFault =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  };

/** The bad answers seen in the field, by name: wrong bodies, error pages, a refusal, a cut answer, a reset, and
 * no answer at all. */
export const ENGINE_FAULTS = {
  not_json: engineReply(200, 'text/html', '<html>proxy page</html>'),
  success_yes: engineReply(200, 'application/json', '{"success":"yes"}'),
  list: engineReply(200, 'application/json', '[]'),
  null: engineReply(200, 'application/json', 'null'),
  html_500: engineReply(500, 'text/html', '<html><body>Internal Server Error</body></html>'),
  html_400: engineReply(400, 'text/html', '<html><body>Bad Request</body></html>'),
  success_false: engineReply(200, 'application/json', '{"success":false,"message":"engine refused"}'),
  // Announces 100 bytes, sends 6, dies.
  truncated: (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
    res.write('{"succ');
    setTimeout(() => res.destroy(), 20);
  },
  reset: (req) => req.socket.destroy(),
  silent: () => {},
} satisfies Record<string, EngineFault>;

export type EngineFaultName = keyof typeof ENGINE_FAULTS;

// ---- sglang-sim engines through the real launch path ----------------------------------------------------------

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

/** Whether process `pid` still exists (signal 0 checks without sending anything). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
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
