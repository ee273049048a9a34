import { type MemoryTag, MemoryTagSchema, type PauseMode, PauseModeSchema } from './protocol.ts';
import {
  classFields,
  compareSGLangVersions,
  flagOf,
  hasRoute,
  routeOf,
  SGLANG_RELEASES,
  SGLANG_VERSIONS,
  type Surface,
  surfaceOf,
} from './sglang-surface.ts';

/** What uis can do with an engine of one SGLang release, derived from its surface (never from the version
 * number): the README table, the engine's refusals and the conformance tests all read this one function. */
export interface SGLangFeatures {
  version: string;
  /** Memory tags `/release_memory_occupation` takes; empty = it releases everything or nothing (no `tags`). */
  memoryTags: MemoryTag[];
  /** Pause modes the engine honours: the `mode`s `/pause_generation` takes (a release whose pause takes no body
   * aborts, so `abort` only). */
  pauseModes: PauseMode[];
  /** Where model info lives: `/model_info`, or the older `/get_model_info`. */
  modelInfoPath: '/model_info' | '/get_model_info' | null;
  serverInfoPath: '/server_info' | '/get_server_info' | null;
  /** Where the weight version is read: `/get_weight_version`, or the `weight_version` of model info. */
  weightVersionFrom: '/get_weight_version' | 'model_info' | null;
  /** `weight_version` accepted by the weight-update requests (disk, distributed, tensor). */
  weightVersionOnUpdate: boolean;
  updateWeightVersion: boolean;
  updateFromDisk: boolean;
  updateFromDistributed: boolean;
  /** `/destroy_weights_update_group` exists (else a group lives until the engine stops). */
  destroyWeightsUpdateGroup: boolean;
  updateFromTensor: boolean;
  /** `--enable-weights-cpu-backup`: a static model can release its weights and get them back. */
  weightsCpuBackup: boolean;
  /** Where running and waiting requests are read: /get_load per DP rank, /get_load as one token total (before
   * 0.5.6), or /v1/loads (its only home from 0.5.23). */
  loadFrom: '/get_load' | '/get_load (token total)' | '/v1/loads' | null;
  abortAll: boolean;
  /** A finished answer says which weight version produced which output tokens: `meta_info.weight_versions`
   * (`[{version, start, end}]`, also `metadata.weight_versions` of OpenAI answers and on abort answers), set by
   * the scheduler's `compute_weight_version_spans` (first in 0.5.19; `AbortReq.weight_versions` marks it). */
  weightVersionSpans: boolean;
  /** `stream_options.continuous_usage_stats`: every chunk of an OpenAI stream carries its usage so far (its
   * `completion_tokens` counts the output tokens made up to it; first in 0.5.6). */
  continuousUsageStats: boolean;
}

const has = (s: Surface, method: string, path: string) => hasRoute(s, method, path);

/** The `Literal[...]` values of a class field's annotation, e.g. PauseGenerationReqInput.mode. */
function literalValues(surface: Surface, cls: string, field: string): string[] {
  const type = surface.classes[cls]?.fields[field]?.type ?? '';
  const m = /Literal\[([^\]]*)\]/.exec(type);
  if (m === null) return [];
  return [...(m[1] as string).matchAll(/['"]([^'"]+)['"]/g)].map((x) => x[1] as string);
}

function fieldOf(surface: Surface, cls: string, field: string): boolean {
  return classFields(surface, cls)?.includes(field) ?? false;
}

function loadFrom(surface: Surface): SGLangFeatures['loadFrom'] {
  if (routeOf(surface, '/get_load') !== undefined) {
    // 0.5.2's tokenizer manager answers `{"load": total}` (the `get_load[]` answer read from its source).
    const total = 'load' in (surface.answers['get_load[]']?.fields ?? {});
    return total ? '/get_load (token total)' : '/get_load';
  }
  return has(surface, 'GET', '/v1/loads') ? '/v1/loads' : null;
}

export function sglangFeatures(surface: Surface): SGLangFeatures {
  const releaseTakesTags = fieldOf(surface, 'ReleaseMemoryOccupationReqInput', 'tags');
  const pause = routeOf(surface, '/pause_generation');
  // A pause without a body (0.5.2) pauses and aborts every request (its tokenizer_manager.pause_generation calls
  // abort_request(abort_all=True)): the `abort` mode, the only one.
  const modes =
    pause === undefined
      ? []
      : pause.body === undefined
        ? ['abort']
        : literalValues(surface, pause.body, 'mode');
  const modelInfoPath = has(surface, 'GET', '/model_info')
    ? '/model_info'
    : has(surface, 'GET', '/get_model_info')
      ? '/get_model_info'
      : null;
  const modelInfoHasVersion = surface.routes.some(
    (r) => r.path === modelInfoPath && (r.answer_keys ?? []).includes('weight_version'),
  );
  return {
    version: surface.sglang_version,
    memoryTags: releaseTakesTags
      ? surface.memory_tags.filter((t): t is MemoryTag => MemoryTagSchema.safeParse(t).success)
      : [],
    pauseModes: modes.filter((m): m is PauseMode => PauseModeSchema.safeParse(m).success),
    modelInfoPath,
    serverInfoPath: has(surface, 'GET', '/server_info')
      ? '/server_info'
      : has(surface, 'GET', '/get_server_info')
        ? '/get_server_info'
        : null,
    weightVersionFrom: has(surface, 'GET', '/get_weight_version')
      ? '/get_weight_version'
      : modelInfoHasVersion
        ? 'model_info'
        : null,
    weightVersionOnUpdate: ['UpdateWeightFromDiskReqInput', 'UpdateWeightsFromDistributedReqInput'].every(
      (c) => fieldOf(surface, c, 'weight_version'),
    ),
    updateWeightVersion: has(surface, 'POST', '/update_weight_version'),
    updateFromDisk: has(surface, 'POST', '/update_weights_from_disk'),
    updateFromDistributed:
      has(surface, 'POST', '/init_weights_update_group') &&
      has(surface, 'POST', '/update_weights_from_distributed'),
    destroyWeightsUpdateGroup: has(surface, 'POST', '/destroy_weights_update_group'),
    updateFromTensor: has(surface, 'POST', '/update_weights_from_tensor'),
    weightsCpuBackup: flagOf(surface, '--enable-weights-cpu-backup') !== undefined,
    loadFrom: loadFrom(surface),
    abortAll: fieldOf(surface, 'AbortReq', 'abort_all'),
    weightVersionSpans: fieldOf(surface, 'AbortReq', 'weight_versions'),
    continuousUsageStats: fieldOf(surface, 'StreamOptions', 'continuous_usage_stats'),
  };
}

/** Features of a supported version, or undefined for a version uis has no surface for. */
export function featuresOf(version: string): SGLangFeatures | undefined {
  const surface = surfaceOf(version);
  return surface === undefined ? undefined : sglangFeatures(surface);
}

/** What an engine reporting `version` can do: its release's features, or for a release uis has no surface for,
 * those of the nearest supported release below it (the oldest for one below every supported release). */
export function featuresForVersion(version: string): SGLangFeatures {
  const below = SGLANG_VERSIONS.filter((v) => compareSGLangVersions(v, version) <= 0);
  const nearest = below[below.length - 1] ?? (SGLANG_VERSIONS[0] as string);
  return { ...(featuresOf(nearest) as SGLangFeatures), version };
}

/** Supported releases whose features pass `can`, for an error that says which release to run instead. */
export function releasesThatCan(can: (f: SGLangFeatures) => boolean): string[] {
  return SGLANG_VERSIONS.filter((v) => can(featuresOf(v) as SGLangFeatures));
}

const yes = (b: boolean) => (b ? 'yes' : 'no');
const list = (xs: readonly string[]) => (xs.length === 0 ? 'none' : xs.join(', '));

/** Where the table sits in packages/sglang-engine/README.md. */
export const README_TABLE_MARKERS = [
  '<!-- sglang-releases:start -->',
  '<!-- sglang-releases:end -->',
] as const;

/** The README table (packages/sglang-engine/README.md): one column per supported release. */
export function renderVersionTable(): string {
  const all = SGLANG_RELEASES.map((r) => ({ release: r, f: featuresOf(r.version) as SGLangFeatures }));
  const rows: Array<[string, (f: SGLangFeatures) => string]> = [
    ['release memory by tag', (f) => list(f.memoryTags)],
    ['pause modes', (f) => list(f.pauseModes)],
    ['model info', (f) => f.modelInfoPath ?? 'none'],
    ['server info', (f) => f.serverInfoPath ?? 'none'],
    ['weight version read from', (f) => f.weightVersionFrom ?? 'none'],
    ['weight_version in weight updates', (f) => yes(f.weightVersionOnUpdate)],
    ['/update_weight_version', (f) => yes(f.updateWeightVersion)],
    ['update from disk', (f) => yes(f.updateFromDisk)],
    ['update from distributed', (f) => yes(f.updateFromDistributed)],
    ['destroy weights update group', (f) => yes(f.destroyWeightsUpdateGroup)],
    ['update from tensor', (f) => yes(f.updateFromTensor)],
    ['static model offload (--enable-weights-cpu-backup)', (f) => yes(f.weightsCpuBackup)],
    ['load read from', (f) => f.loadFrom ?? 'none'],
    ['weight version spans on answers (meta_info.weight_versions)', (f) => yes(f.weightVersionSpans)],
    ['usage on every OpenAI stream chunk (continuous_usage_stats)', (f) => yes(f.continuousUsageStats)],
  ];
  const header = `| uis feature | ${all.map((a) => a.release.version).join(' | ')} |`;
  const rule = `|---|${all.map(() => '---').join('|')}|`;
  const body = rows.map(([name, cell]) => `| ${name} | ${all.map((a) => cell(a.f)).join(' | ')} |`);
  const pins = all.map((a) => `- ${a.release.version}: ${a.release.pinnedBy}`);
  return [header, rule, ...body, '', 'Why each release is in the list:', '', ...pins].join('\n');
}
