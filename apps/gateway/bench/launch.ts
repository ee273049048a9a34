/**
 * Starting the bench's engines and gateway processes, shared by the gateway bench and the paired bench. A
 * gateway can be started from another checkout of the repo (`benchDir`: the paired bench's base worktree), so two
 * commits' gateways run side by side on the same engines.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstJsonLine, freePort, type Proc, start, waitHttpOk } from './procs.ts';

export const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(BENCH_DIR, '../../..');
const simCli = join(REPO, 'packages/sglang-sim/bin/sglang-sim.mjs');
const simSource = join(REPO, 'packages/sglang-sim/src/cli.ts');

/** `sim` when the repo's simulator source is there, else the bench's mini engine. */
export const defaultEngineKind = (): 'sim' | 'mini' => (existsSync(simSource) ? 'sim' : 'mini');

/** `node [nodeArgs] --import tsx <benchDir>/<file> ...rest`, so TypeScript bench entries run without a build. */
export const tsx = (
  file: string,
  rest: string[],
  nodeArgs: string[] = [],
  benchDir = BENCH_DIR,
): [string, string[]] => [process.execPath, [...nodeArgs, '--import', 'tsx', join(benchDir, file), ...rest]];

export interface EngineOptions {
  count: number;
  kind: 'sim' | 'mini';
  served: string;
  decodeUs: number;
  prefillUs: number;
}

/** `count` engines on free ports, up once `/health` answers 200. */
export async function startEngines(o: EngineOptions): Promise<{ urls: string[]; procs: Proc[] }> {
  const procs: Proc[] = [];
  const urls: string[] = [];
  for (let i = 0; i < o.count; i++) {
    const port = await freePort();
    const flags = [
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--served-model-name',
      o.served,
      '--sim-decode-us-per-token',
      String(o.decodeUs),
      '--sim-prefill-us-per-token',
      String(o.prefillUs),
      '--sim-max-running-requests',
      '4096',
      '--skip-server-warmup',
    ];
    const proc =
      o.kind === 'sim'
        ? start(`engine-${i}`, process.execPath, [simCli, ...flags], REPO)
        : start(`engine-${i}`, ...tsx('mini-engine.ts', flags));
    procs.push(proc);
    urls.push(`http://127.0.0.1:${port}`);
  }
  await Promise.all(urls.map((u) => waitHttpOk(`${u}/health`)));
  return { urls, procs };
}

/** The bench's servers: the product's whole stack (`uis`, uis-gateway-server.ts), the forwarding core (`core`,
 * gateway-server.ts), and the calibration relays (node-relay.ts with a raw `net` front or node:http). */
export type ServerKind = 'uis' | 'core' | 'raw relay' | 'node relay';

export interface ServerLaunch {
  /** Process name (bench output, errors). */
  name: string;
  kind: ServerKind;
  engines: string[];
  served: string;
  role: string;
  flags?: string[];
  nodeArgs?: string[];
  /** The bench directory whose server runs (another checkout's apps/gateway/bench); default this one. */
  benchDir?: string;
  /** Wraps the command (e.g. `nice -n N`). */
  wrap?: (cmd: [string, string[]]) => [string, string[]];
}

/** The path prefix of a server's serving routes (`/generate` is under it): the gateways serve per role. */
export const servingPrefix = (kind: ServerKind, role: string): string =>
  kind === 'uis' || kind === 'core' ? `/${role}` : '';

/** A bench server process, up once it printed its port. */
export async function startServerProc(g: ServerLaunch): Promise<{ proc: Proc; url: string }> {
  const benchDir = g.benchDir ?? BENCH_DIR;
  const engines = ['--engines', g.engines.join(',')];
  const [file, rest] =
    g.kind === 'uis' || g.kind === 'core'
      ? [
          g.kind === 'core' ? 'gateway-server.ts' : 'uis-gateway-server.ts',
          [...engines, '--model', g.served, '--role', g.role],
        ]
      : ['node-relay.ts', [...engines, '--front', g.kind === 'raw relay' ? 'raw' : 'http']];
  const cmd = tsx(file, [...rest, ...(g.flags ?? [])], g.nodeArgs ?? [], benchDir);
  // cwd: the checkout's apps/gateway, so `--import tsx` and the server's imports resolve in that checkout.
  const proc = start(g.name, ...(g.wrap ?? ((c) => c))(cmd), dirname(benchDir));
  const { port } = await firstJsonLine<{ port: number }>(proc);
  return { proc, url: `http://127.0.0.1:${port}` };
}
