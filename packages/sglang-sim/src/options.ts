import {
  DEFAULT_SGLANG_VERSION,
  flagOf,
  parseLikeArgparse,
  SGLANG_VERSIONS,
  type Surface,
  surfaceOf,
} from '@uis/sglang-engine';
import { z } from 'zod';

/** The launch flags the simulator understands: SGLang's own (same names, camelCased) plus `sim*` knobs. */
export const SimOptionsSchema = z.object({
  modelPath: z.string().min(1).default('sim/tiny-model'),
  servedModelName: z.string().min(1).optional(),
  tokenizerPath: z.string().optional(),
  host: z.string().default('127.0.0.1'),
  /** SGLang's default is 30000; pass 0 for an ephemeral port (tests). */
  port: z.coerce.number().int().min(0).max(65535).default(30000),
  tpSize: z.coerce.number().int().positive().default(1),
  ppSize: z.coerce.number().int().positive().default(1),
  dpSize: z.coerce.number().int().positive().default(1),
  epSize: z.coerce.number().int().positive().default(1),
  baseGpuId: z.coerce.number().int().nonnegative().default(0),
  gpuIdStep: z.coerce.number().int().positive().default(1),
  nnodes: z.coerce.number().int().positive().default(1),
  nodeRank: z.coerce.number().int().nonnegative().default(0),
  distInitAddr: z.string().optional(),
  enableMemorySaver: z.boolean().default(false),
  /** SGLang's --enable-metrics: Prometheus metrics at /metrics. */
  enableMetrics: z.boolean().default(false),
  enableWeightsCpuBackup: z.boolean().default(false),
  disaggregationMode: z.enum(['null', 'prefill', 'decode']).default('null'),
  disaggregationBootstrapPort: z.coerce.number().int().min(0).max(65535).default(8998),
  skipServerWarmup: z.boolean().default(false),
  memFractionStatic: z.coerce.number().positive().max(1).optional(),
  contextLength: z.coerce.number().int().positive().default(32768),
  weightVersion: z.string().default('default'),
  streamInterval: z.coerce.number().int().positive().default(1),
  /** Modelled cost of one prompt token in a prefill step (microseconds). */
  simPrefillUsPerToken: z.coerce.number().nonnegative().default(0),
  /** Modelled cost of one decode step (one token for every running request, as a GPU batch does). */
  simDecodeUsPerToken: z.coerce.number().nonnegative().default(0),
  simMaxRunningRequests: z.coerce.number().int().positive().default(256),
  /** SGLang's --max-running-requests: the running batch's cap when lower than the simulator's own; the rest wait
   * in the queue (`sglang:num_queue_reqs`). */
  maxRunningRequests: z.coerce.number().int().positive().optional(),
  simKvCapacityTokens: z.coerce.number().int().positive().default(1_000_000),
  simStartupMs: z.coerce.number().nonnegative().default(0),
  simOnloadMs: z.coerce.number().nonnegative().default(0),
  simOffloadMs: z.coerce.number().nonnegative().default(0),
  /** Serve N generation requests, then crash after the first token of the next one. */
  simCrashAfter: z.coerce.number().int().nonnegative().optional(),
  /** Accept N generation requests, then stop making progress and stop answering. */
  simHangAfter: z.coerce.number().int().nonnegative().optional(),
  /** Probability that a generation request answers 500. */
  simErrorRate: z.coerce.number().min(0).max(1).default(0),
  simSlowHealthMs: z.coerce.number().nonnegative().default(0),
  /** release_memory_occupation answers before the memory is free (the offload still takes simOffloadMs). */
  simEarlyRelease: z.boolean().default(false),
  simSeed: z.coerce.number().int().default(0),
  /** The memory model (gpu-memory.ts): the whole model's weight bytes in GB (0: not sized, fixed times only), the
   * KV cache's share of each GPU, the CUDA-graph reserve per GPU, the GPU and its copy speeds (an H200's). */
  simWeightGb: z.coerce.number().nonnegative().default(0),
  simKvCacheShare: z.coerce.number().min(0).max(1).default(0),
  simCudaGraphGb: z.coerce.number().nonnegative().default(0),
  simGpuMemoryGb: z.coerce.number().positive().default(141),
  simPinnedGbps: z.coerce.number().positive().default(51.5),
  simPageableGbps: z.coerce.number().positive().default(9),
  simAllocFreeS: z.coerce.number().nonnegative().default(0.03),
  /** Names of this process's GPUs (`node-0:0,node-0:1`): engines of one process naming the same GPU share it. */
  simGpus: z.string().optional(),
  /** Defaults to the CUDA_VISIBLE_DEVICES of the process. */
  cudaVisibleDevices: z.string().optional(),
  /** Print SGLang-like log lines to stderr. */
  log: z.boolean().default(false),
  /** The SGLang release the simulator stands in for: the `version` it reports, the routes it serves and the
   * launch flags it accepts are that release's (packages/sglang-engine/surfaces). */
  simSglangVersion: z
    .string()
    .default(DEFAULT_SGLANG_VERSION)
    .refine((v) => surfaceOf(v) !== undefined, {
      message: `not a supported SGLang release; use one of ${SGLANG_VERSIONS.join(', ')}`,
    }),
});
export type SimOptions = z.infer<typeof SimOptionsSchema>;
export type SimOptionsInput = z.input<typeof SimOptionsSchema>;

/** Flags that take no value. */
const BOOLEAN_FLAGS = new Set([
  'enableMemorySaver',
  'enableMetrics',
  'enableWeightsCpuBackup',
  'skipServerWarmup',
  'simEarlyRelease',
  'log',
]);

/** SGLang's short spellings. */
const ALIASES: Record<string, string> = {
  tp: 'tpSize',
  pp: 'ppSize',
  dp: 'dpSize',
  ep: 'epSize',
  model: 'modelPath',
};

const KNOWN = new Set(Object.keys(SimOptionsSchema.shape));

const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const camel = (flag: string) => flag.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

export interface ParsedArgs {
  options: SimOptions;
  /** One line per ignored flag. */
  warnings: string[];
}

/** A command line SGLang's own parser refuses: `launch_server.py: error: ...`, exit code 2 (argparse's). */
export class ArgparseError extends Error {
  readonly exitCode = 2;
}

/** The simulator's own options, which no SGLang release has: its `--sim-*` knobs, `--log`, and the GPUs it
 * would otherwise read from CUDA_VISIBLE_DEVICES. */
const SIM_ONLY = (key: string) => key.startsWith('sim') || key === 'log' || key === 'cudaVisibleDevices';

/** The words of `argv` SGLang's parser sees: the simulator's own options (those the release has no flag for,
 * with their values) taken out. */
function sglangWords(argv: readonly string[], surface: Surface): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i] as string;
    const name = word.startsWith('--') ? (word.slice(2).split('=')[0] as string) : '';
    const key = ALIASES[name] ?? camel(name);
    if (name === '' || !SIM_ONLY(key) || flagOf(surface, `--${name}`) !== undefined) {
      out.push(word);
      continue;
    }
    const next = argv[i + 1];
    if (!word.includes('=') && !BOOLEAN_FLAGS.has(key) && next !== undefined && !next.startsWith('--')) i++;
  }
  return out;
}

/** Refuses, as SGLang's argparse does, a flag (or value) the simulated release would refuse. */
function checkLikeSGLang(argv: readonly string[]): void {
  const at = argv.findIndex((w) => w === '--sim-sglang-version' || w.startsWith('--sim-sglang-version='));
  const word = argv[at] ?? '';
  const version = at === -1 ? DEFAULT_SGLANG_VERSION : word.includes('=') ? word.split('=')[1] : argv[at + 1];
  const surface = surfaceOf(version ?? '');
  if (surface === undefined) return; // the schema refuses the version itself, naming the supported ones
  const { error } = parseLikeArgparse(surface, sglangWords(argv, surface), false);
  if (error !== null) throw new ArgparseError(`launch_server.py: error: ${error}`);
}

/** Parses SGLang-style argv (`--tp-size 2`, `--tp=2`, `--enable-memory-saver`). A flag the simulated release
 * (`--sim-sglang-version`) does not have is refused as its argparse refuses it (`ArgparseError`, exit 2); a flag
 * it has that the simulator does not model is accepted with a warning. Throws on a bad value. */
export function parseSimArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ParsedArgs {
  checkLikeSGLang(argv);
  const raw: Record<string, unknown> = {};
  const warnings: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) {
      warnings.push(`ignoring stray argument ${JSON.stringify(arg)}`);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const inline = eq === -1 ? undefined : arg.slice(eq + 1);
    const key = ALIASES[name] ?? camel(name);
    const next = argv[i + 1];
    const nextIsValue = next !== undefined && !next.startsWith('--');
    if (!KNOWN.has(key)) {
      warnings.push(`ignoring --${name} (an SGLang flag the simulator does not model)`);
      if (inline === undefined && nextIsValue) i++;
      continue;
    }
    if (BOOLEAN_FLAGS.has(key)) {
      raw[key] = inline === undefined ? true : inline !== 'false' && inline !== '0';
      continue;
    }
    if (inline !== undefined) raw[key] = inline;
    else if (nextIsValue) {
      raw[key] = next;
      i++;
    } else throw new Error(`flag --${name} needs a value`);
  }
  if (raw.cudaVisibleDevices === undefined && env.CUDA_VISIBLE_DEVICES !== undefined) {
    raw.cudaVisibleDevices = env.CUDA_VISIBLE_DEVICES;
  }
  const parsed = SimOptionsSchema.safeParse(raw);
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((x) => `--${kebab(String(x.path[0] ?? ''))}: ${x.message}`)
      .join('; ');
    throw new Error(`invalid launch flags: ${detail}`);
  }
  return { options: parsed.data, warnings };
}
