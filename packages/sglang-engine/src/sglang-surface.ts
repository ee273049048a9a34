/**
 * The SGLang releases uis supports, each with its surface read from its own wheel by
 * `scripts/sglang-surface/extract_surface.py` (`pnpm sglang:surface <version>`): launch flags, HTTP routes, and the
 * request/answer classes uis sends or reads. Facts about SGLang come from these files, not from memory.
 */
import { z } from 'zod';
import s0_5_2 from '../surfaces/0.5.2.json' with { type: 'json' };
import s0_5_6post2 from '../surfaces/0.5.6.post2.json' with { type: 'json' };
import s0_5_9 from '../surfaces/0.5.9.json' with { type: 'json' };
import s0_5_10post1 from '../surfaces/0.5.10.post1.json' with { type: 'json' };
import s0_5_12 from '../surfaces/0.5.12.json' with { type: 'json' };
import s0_5_15post1 from '../surfaces/0.5.15.post1.json' with { type: 'json' };
import s0_5_17 from '../surfaces/0.5.17.json' with { type: 'json' };
import s0_5_23 from '../surfaces/0.5.23.json' with { type: 'json' };

export const SurfaceFlagSchema = z.object({
  names: z.array(z.string().startsWith('-')).min(1),
  action: z.string(),
  /** [min, max] values after the flag; max null = unbounded. */
  arity: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative().nullable()]),
  nargs: z.union([z.string(), z.number()]).optional(),
  /** argparse `type=`: str, int, float, or the name of SGLang's own parser function. */
  type: z.string().optional(),
  choices: z.array(z.unknown()).optional(),
  /** The expression when the choices are computed at run time (then `choices` is absent). */
  choices_source: z.string().optional(),
  default: z.unknown().optional(),
  default_source: z.string().optional(),
  dest: z.string().optional(),
  required: z.boolean().optional(),
  deprecated: z.boolean().optional(),
});
export type SurfaceFlag = z.infer<typeof SurfaceFlagSchema>;

export const SurfaceRouteSchema = z.object({
  path: z.string().optional(),
  path_source: z.string().optional(),
  methods: z.array(z.string()),
  handler: z.string(),
  body: z.string().optional(),
  /** Keys of the dict the handler answers with (error answers aside). */
  answer_keys: z.array(z.string()).optional(),
  /** The answer has more keys than `answer_keys` (a `**spread`, or a part built elsewhere). */
  answer_open: z.boolean().optional(),
  /** The handler only raises this status (a route kept to say it is gone): not served. */
  always_status: z.number().int().optional(),
});
export type SurfaceRoute = z.infer<typeof SurfaceRouteSchema>;

export const SurfaceFieldSchema = z.object({
  type: z.string(),
  default: z.unknown().optional(),
  default_source: z.string().optional(),
  required: z.boolean().optional(),
});

/** An answer SGLang builds outside its handlers (scripts/sglang-surface/answers.py): each key with the lists of
 * `if` conditions under which it is set (`[]` = always; `via f` = set by helper f; `= None` = a placeholder the
 * caller fills later). */
export const SurfaceAnswerSchema = z.object({
  source: z.string(),
  /** Expressions whose keys the source does not spell out (the answer may have more keys). */
  open_sources: z.array(z.string()).optional(),
  fields: z.record(z.string(), z.array(z.array(z.string()))),
});
export type SurfaceAnswer = z.infer<typeof SurfaceAnswerSchema>;

export const SurfaceSchema = z.object({
  sglang_version: z.string(),
  extractor: z.string(),
  flags: z.record(z.string(), SurfaceFlagSchema),
  routes: z.array(SurfaceRouteSchema),
  classes: z.record(
    z.string(),
    z.object({ module: z.string(), fields: z.record(z.string(), SurfaceFieldSchema) }),
  ),
  /** `generate`, `generate.meta_info`, `get_load[]` (one entry), `v1/loads.loads[]` (one entry). */
  answers: z.record(z.string(), SurfaceAnswerSchema),
  memory_tags: z.array(z.string()),
});
export type Surface = z.infer<typeof SurfaceSchema>;

/** A supported release and why it is in the list (who pins it, read from their repositories). */
export interface SGLangRelease {
  version: string;
  pinnedBy: string;
}

/** Oldest first. The oldest is the first release with weight versions (`/update_weight_version`, the
 * `weight_version` of model info and of every weight update), which uis's weight switch needs. */
export const SGLANG_RELEASES: readonly SGLangRelease[] = [
  { version: '0.5.2', pinnedBy: 'oldest supported: weight versions exist (0.4.10.post2 has none)' },
  { version: '0.5.6.post2', pinnedBy: 'verl docker/Dockerfile.stable.sglang (lmsysorg/sglang:v0.5.6.post2)' },
  { version: '0.5.9', pinnedBy: 'Relax docker/Dockerfile (BASE_IMAGE lmsysorg/sglang:v0.5.9)' },
  { version: '0.5.10.post1', pinnedBy: 'slime docker/README.md (history)' },
  { version: '0.5.12', pinnedBy: 'verl pyproject.toml extra `sglang` (sglang==0.5.12)' },
  {
    version: '0.5.15.post1',
    pinnedBy:
      'slime docker/README.md (current stable); Relax docker/Dockerfile at ef0820a (BASE_IMAGE v0.5.15.post1-cu129)',
  },
  { version: '0.5.17', pinnedBy: 'Relax docker/patch/sglang/v0.5.17.patch (the release Relax patches)' },
  { version: '0.5.23', pinnedBy: 'newest on the package index' },
];

export const SGLANG_VERSIONS: readonly string[] = SGLANG_RELEASES.map((r) => r.version);

/** The version a config targets when it names none: the newest supported. */
export const DEFAULT_SGLANG_VERSION: string = SGLANG_VERSIONS[SGLANG_VERSIONS.length - 1] as string;

const RAW: Readonly<Record<string, unknown>> = {
  '0.5.2': s0_5_2,
  '0.5.6.post2': s0_5_6post2,
  '0.5.9': s0_5_9,
  '0.5.10.post1': s0_5_10post1,
  '0.5.12': s0_5_12,
  '0.5.15.post1': s0_5_15post1,
  '0.5.17': s0_5_17,
  '0.5.23': s0_5_23,
};

const parsed = new Map<string, Surface>();

/** The surface of a supported version (parsed once), or undefined for a version uis has no surface for. */
export function surfaceOf(version: string): Surface | undefined {
  const cached = parsed.get(version);
  if (cached !== undefined) return cached;
  const raw = RAW[version];
  if (raw === undefined) return undefined;
  const surface = SurfaceSchema.parse(raw);
  parsed.set(version, surface);
  return surface;
}

const flagIndexes = new WeakMap<Surface, Map<string, SurfaceFlag>>();

/** The flag a command-line name (`--tp-size`, or an alias such as `--tensor-parallel-size`) means in `surface`. */
export function flagOf(surface: Surface, name: string): SurfaceFlag | undefined {
  let index = flagIndexes.get(surface);
  if (index === undefined) {
    index = new Map();
    for (const flag of Object.values(surface.flags)) for (const n of flag.names) index.set(n, flag);
    flagIndexes.set(surface, index);
  }
  return index.get(name);
}

/** The route serving `path`, or undefined (a route whose handler only raises, e.g. 0.5.10's
 * /get_weight_version answering 404, serves nothing). */
export function routeOf(surface: Surface, path: string): SurfaceRoute | undefined {
  return surface.routes.find((r) => r.path === path && r.always_status === undefined);
}

/** Whether `surface` serves `method path` (not merely declares it to answer an error). */
export function hasRoute(surface: Surface, method: string, path: string): boolean {
  return surface.routes.some(
    (r) => r.path === path && r.methods.includes(method) && r.always_status === undefined,
  );
}

/** Field names of a request/answer class, or undefined when the version has no such class. */
export function classFields(surface: Surface, name: string): string[] | undefined {
  const cls = surface.classes[name];
  return cls === undefined ? undefined : Object.keys(cls.fields);
}

/** `a < b` for SGLang versions (`0.5.10.post1` after `0.5.10`, `0.5.10` after `0.5.9`). */
export function compareSGLangVersions(a: string, b: string): number {
  const parts = (v: string) => v.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  const pa = parts(a);
  const pb = parts(b);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === y) continue;
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (typeof x === 'number' && typeof y === 'number') return x - y;
    return String(x) < String(y) ? -1 : 1;
  }
  return 0;
}
