import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fromRelaxArgs, planPlacement, planTotalGpus } from '@uis/planner';
import { sglangPlanIssues } from '@uis/sglang-engine';
import {
  configuredRoles,
  type DeploymentMode,
  errorIssues,
  type GroupMemoryPlan,
  type GroupPlacement,
  loadConfig,
  type PlacementPlan,
  type PlanViolation,
  type UisConfig,
} from '@uis/spec';
import type { Command } from 'commander';
import { EXIT_BAD_INPUT, EXIT_INVALID_LAYOUT, EXIT_OK, renderIssues } from './cli-errors.ts';
import { readInputFile } from './input-file.ts';
import { renderCompare, renderMemory, table } from './plan-memory.ts';

/** `uis plan`: validate a layout (config file or Relax flags) and print where every engine goes. Exit codes:
 * 0 valid, 1 invalid layout, 2 unusable input. */

export { EXIT_BAD_INPUT, EXIT_INVALID_LAYOUT, EXIT_OK } from './cli-errors.ts';

export interface PlanCommandOptions {
  config?: string;
  relaxArgs?: boolean;
  allowUnknownFlags?: boolean;
  json?: boolean;
  /** Configured vs optimized defer order side by side (text), or the memory plan in the JSON. */
  compare?: boolean;
}

export interface PlanIo {
  cwd: string;
  readFile: (path: string) => string;
  out: (text: string) => void;
  err: (text: string) => void;
}

/** The JSON shape of `uis plan --json`. */
export interface PlanJson {
  ok: boolean;
  mode: DeploymentMode | null;
  pools: Record<string, number>;
  /** GPUs of every pool together (Relax's total_required_gpus). */
  total_gpus: number;
  placements: Array<
    Pick<
      GroupPlacement,
      | 'role'
      | 'model'
      | 'group'
      | 'worker_type'
      | 'num_gpus'
      | 'gpus_per_engine'
      | 'tp'
      | 'pp'
      | 'dp'
      | 'bundle_start'
      | 'bundle_stop'
      | 'bundle_indices'
      | 'gpu_ids'
      | 'nodes_per_engine'
      | 'pool'
      | 'owner'
      | 'phase'
      | 'deferred'
    > & { replicas: number }
  >;
  errors: PlanViolation[];
  /** With --compare: per activation group the configured and optimized order with their predicted switches. */
  memory?: GroupMemoryPlan[];
}

export function registerPlanCommand(program: Command): void {
  program
    .command('plan')
    .description(
      'validate a layout and print the placement of every engine (exit 1 on violations, 2 on bad input)',
    )
    .option('--config <file>', 'a UIS config file (YAML or JSON); the same as giving FILE')
    .option('--relax-args', 'read Relax command-line flags given after `--`')
    .option('--allow-unknown-flags', 'ignore Relax flags that do not concern placement (training flags)')
    .option('--json', 'print the plan as JSON')
    .option(
      '--compare',
      'print the configured and the planner-optimized defer order side by side (with --json: the memory plan)',
    )
    .argument(
      '[file-or-flags...]',
      'a UIS config file (YAML or JSON), or Relax flags after `--` with --relax-args',
    )
    .allowUnknownOption()
    .action((flags: string[], options: PlanCommandOptions) => {
      process.exitCode = runPlan(flags, options, {
        cwd: process.cwd(),
        readFile: (p) => readFileSync(p, 'utf8'),
        out: (t) => process.stdout.write(t),
        err: (t) => process.stderr.write(t),
      });
    });
}

function modeOf(config: UisConfig): DeploymentMode | null {
  const modes = configuredRoles(config).map((r) => r.spec.deployment.mode);
  for (const m of ['colocated_defer', 'colocated_split', 'shared_coresident', 'decoupled'] as const) {
    if (modes.includes(m)) return m;
  }
  return null;
}

/** Reads the input, plans, prints; returns the exit code. Never throws. */
export function runPlan(flags: readonly string[], options: PlanCommandOptions, io: PlanIo): number {
  const inputError = (errors: PlanViolation[]) => {
    if (options.json)
      io.out(
        `${JSON.stringify({ ok: false, mode: null, pools: {}, total_gpus: 0, placements: [], errors } satisfies PlanJson, null, 2)}\n`,
      );
    else io.err(renderIssues('uis plan: unusable input', errors));
    return EXIT_BAD_INPUT;
  };
  // `uis plan FILE` and `uis plan --config FILE` are the same; Relax flags come only with --relax-args.
  const file = options.relaxArgs ? undefined : (options.config ?? flags[0]);
  if (options.relaxArgs ? options.config !== undefined : file === undefined) {
    return inputError([
      {
        code: 'usage',
        path: 'uis plan',
        message: 'give exactly one of FILE (or --config FILE) or --relax-args -- <flags...>',
      },
    ]);
  }
  const extra = file === undefined ? [] : flags.slice(options.config === undefined ? 1 : 0);
  if (extra.length > 0) {
    return inputError([
      { code: 'usage', path: 'uis plan', message: `unexpected arguments: ${extra.join(' ')}` },
    ]);
  }
  let config: UisConfig;
  try {
    if (file !== undefined) {
      const path = resolve(io.cwd, file);
      config = loadConfig(
        readInputFile(path, options.config === undefined ? 'FILE' : '--config', io.readFile),
        file,
      );
    } else {
      const files: Record<string, string> = {};
      for (let i = 0; i < flags.length; i++) {
        const f = flags[i] ?? '';
        const value = f.startsWith('--sglang-config=')
          ? f.slice('--sglang-config='.length)
          : f === '--sglang-config'
            ? flags[i + 1]
            : undefined;
        if (value === undefined) continue;
        files[value] = readInputFile(resolve(io.cwd, value), '--sglang-config', io.readFile);
      }
      config = fromRelaxArgs(flags, { files, allowUnknown: options.allowUnknownFlags ?? false });
    }
  } catch (e) {
    return inputError(errorIssues(e, '(input)'));
  }
  const planned = planPlacement(config);
  // A launch flag a model's SGLang release lacks is reported with the layout's own violations.
  const issues = planned.ok ? sglangPlanIssues(config, planned.plan) : [];
  const result = issues.length > 0 ? { ok: false as const, errors: issues } : planned;
  const json: PlanJson = result.ok
    ? {
        ok: true,
        mode: result.plan.mode,
        pools: Object.fromEntries(Object.entries(result.plan.pools).map(([k, p]) => [k, p.size])),
        total_gpus: planTotalGpus(result.plan),
        placements: result.plan.placements.map(toJson),
        errors: [],
      }
    : { ok: false, mode: modeOf(config), pools: {}, total_gpus: 0, placements: [], errors: result.errors };
  if (options.compare && result.ok) json.memory = result.plan.memory ?? [];
  if (options.json) io.out(`${JSON.stringify(json, null, 2)}\n`);
  else if (result.ok) {
    const memory = result.plan.memory ?? [];
    io.out(
      `${renderPlan(result.plan)}${renderMemory(memory)}${options.compare ? renderCompare(memory) : ''}`,
    );
  } else io.out(renderViolations(result.errors));
  return result.ok ? EXIT_OK : EXIT_INVALID_LAYOUT;
}

function toJson(p: GroupPlacement): PlanJson['placements'][number] {
  return {
    role: p.role,
    model: p.model,
    group: p.group,
    worker_type: p.worker_type,
    num_gpus: p.num_gpus,
    gpus_per_engine: p.gpus_per_engine,
    tp: p.tp,
    pp: p.pp,
    dp: p.dp,
    bundle_start: p.bundle_start,
    bundle_stop: p.bundle_stop,
    bundle_indices: p.bundle_indices,
    gpu_ids: p.gpu_ids,
    replicas: p.replicas.length,
    nodes_per_engine: p.nodes_per_engine,
    pool: p.pool,
    owner: p.owner,
    phase: p.phase,
    deferred: p.deferred,
  };
}

/** `0-3,6` style ranges keep wide layouts on one line. */
export function ranges(ids: readonly number[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < ids.length) {
    let j = i;
    while (j + 1 < ids.length && ids[j + 1] === (ids[j] ?? 0) + 1) j++;
    out.push(i === j ? `${ids[i]}` : `${ids[i]}-${ids[j]}`);
    i = j + 1;
  }
  return out.join(',');
}

export function renderPlan(plan: PlacementPlan): string {
  const pools = Object.values(plan.pools)
    .map((p) => `${p.name}=${p.size} (owner ${p.owner}, deleted by ${p.deleted_by})`)
    .join(', ');
  const rows = plan.placements.map((p) => {
    const bundles = plan.pools[p.pool]?.bundles ?? [];
    const perNode = new Map<string, number[]>();
    for (const b of p.bundle_indices) {
      const bundle = bundles[b];
      if (!bundle) continue;
      const list = perNode.get(bundle.node) ?? [];
      list.push(bundle.gpu_id);
      perNode.set(bundle.node, list);
    }
    return [
      p.role,
      p.model,
      `${p.group}${p.worker_type === 'regular' ? '' : ` ${p.worker_type}`}`,
      `${p.pool}[${p.bundle_start}..${p.bundle_stop - 1}]`,
      [...perNode].map(([node, gpus]) => `${node}:${ranges(gpus)}`).join(' '),
      p.worker_type === 'placeholder'
        ? '0 (reserved)'
        : `${p.replicas.length} x tp${p.tp}${p.pp > 1 ? ` pp${p.pp}` : ''}${p.nodes_per_engine > 1 ? ` over ${p.nodes_per_engine} nodes` : ''}`,
      p.phase === null ? '-' : `${p.phase}${p.deferred ? ' (deferred)' : ''}`,
      p.owner,
    ];
  });
  const phases = plan.activation_groups
    .map(
      (g) =>
        `activation group ${g.name}: ${g.phases.map((ph) => `${ph.name}[${ph.residents.join(',')}]`).join(' -> ')}`,
    )
    .join('\n');
  return `mode: ${plan.mode}\npools: ${pools}\ntotal GPUs: ${planTotalGpus(plan)}\n${phases ? `${phases}\n` : ''}\n${table(['ROLE', 'MODEL', 'GROUP', 'BUNDLES', 'GPUS PER NODE', 'REPLICAS', 'PHASE', 'OWNER'], rows)}`;
}

export function renderViolations(errors: readonly PlanViolation[]): string {
  return `invalid layout: ${errors.length} violation${errors.length === 1 ? '' : 's'}\n${table(
    ['CODE', 'PATH', 'MESSAGE'],
    errors.map((e) => [e.code, e.path, e.message]),
  )}`;
}
