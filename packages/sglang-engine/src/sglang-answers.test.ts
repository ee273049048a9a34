/**
 * Every field the engine client reads from an answer (a field our schema requires) is produced by each supported
 * release, read from that release's source (the committed surfaces): a handler's dict keys, an answer class's
 * fields, or the dicts the tokenizer manager builds (`answers`, with the conditions under which each key is set).
 * A field a release may leave out must be optional in our schema.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ChatCompletionChunkSchema,
  ChatCompletionResponseSchema,
  CompletionResponseSchema,
  GenerateMetaInfoSchema,
  GenerateResponseSchema,
  GenerateStreamChunkSchema,
  LoadEntrySchema,
  LoadTotalSchema,
  ModelInfoSchema,
  ModelListSchema,
  ServerInfoSchema,
  StatusMessageSchema,
  SuccessMessageSchema,
  UpdateWeightsFromDiskResponseSchema,
  UpdateWeightVersionResponseSchema,
  V1LoadsSchema,
  WeightVersionSchema,
} from './protocol.ts';
import { type SGLangFeatures, sglangFeatures } from './sglang-features.ts';
import { routeOf, SGLANG_VERSIONS, type Surface, surfaceOf } from './sglang-surface.ts';

/** The object under refinements, optional/nullable wrappers and arrays. */
function objectOf(schema: z.ZodType): z.ZodObject {
  let s: unknown = schema;
  for (;;) {
    if (s instanceof z.ZodPipe) s = s.in;
    else if (s instanceof z.ZodOptional || s instanceof z.ZodNullable) s = s.unwrap();
    else if (s instanceof z.ZodArray) s = s.element;
    else break;
  }
  if (!(s instanceof z.ZodObject)) throw new Error('not an object schema');
  return s;
}

/** Keys our schema requires: an answer without one fails to parse (engine_bad_response). */
function required(schema: z.ZodType): string[] {
  const shape = objectOf(schema).shape as Record<string, z.ZodType>;
  return Object.keys(shape).filter((k) => !(shape[k] as z.ZodType).safeParse(undefined).success);
}

const field = (schema: z.ZodType, key: string) => (objectOf(schema).shape as Record<string, z.ZodType>)[key]!;

/**
 * Conditions in the tokenizer manager that hold for every request uis sends: the engine tokenizes (uis never
 * launches --skip-tokenizer-init, so outputs are BatchStrOut[put]), it is a generation (not an embedding), and it
 * asks for no beam search. A key set only under another condition is not produced for uis.
 */
const ALWAYS = [
  /^isinstance\(recv_obj, BatchStrOut(put)?\)$/,
  /^not isinstance\(recv_obj, BatchEmbeddingOut(put)?\)$/,
  /^not \(beam_out_dict is not None\)$/,
];
/** Further conditions per kind of call: the non-streamed answer is the finished one; a stream sends chunks
 * either incrementally or whole. */
const KIND = {
  answer: [/^not \(is_stream\)$/, /^state\.finished$/],
  stream: [/^is_stream$/, /^(not \()?incremental\)?$/, /^(not \()?state\.finished\)?$/],
};
/** `text: None` in a non-incremental stream chunk (0.5.12+) is a placeholder: _wait_one_response sets it to
 * state.get_text() before the chunk is sent (`if ... and out["text"] is None: out["text"] = state.get_text()`). */
const FILLED_LATER = new Set(['= None']);

function producedFor(surface: Surface, answer: string, kind: keyof typeof KIND): Set<string> {
  const entry = surface.answers[answer];
  if (entry === undefined) return new Set();
  const holds = (g: string) =>
    [...ALWAYS, ...KIND[kind]].some((r) => r.test(g)) || (kind === 'stream' && FILLED_LATER.has(g));
  return new Set(
    Object.entries(entry.fields)
      .filter(([, alternatives]) => alternatives.some((guards) => guards.every(holds)))
      .map(([k]) => k),
  );
}

/** Keys of a route's answer: its handler's dict (plus, for server info, every ServerArgs field: the handler
 * spreads `dataclasses.asdict(server_args)` / `server_args.resolved_dict()`). Undefined: the surface cannot say. */
function routeKeys(surface: Surface, path: string): Set<string> | undefined {
  const route = routeOf(surface, path);
  if (route?.answer_keys === undefined) return undefined;
  const keys = new Set(route.answer_keys);
  if (route.answer_open === true && path.endsWith('server_info')) {
    for (const k of Object.keys(surface.answers['server_info.ServerArgs']?.fields ?? {})) keys.add(k);
  }
  return keys;
}

const classKeys = (surface: Surface, cls: string) => new Set(Object.keys(surface.classes[cls]?.fields ?? {}));

interface Read {
  what: string;
  schema: z.ZodType;
  /** Whether the client reads this answer from an engine of this release. */
  when: (f: SGLangFeatures) => boolean;
  keys: (s: Surface, f: SGLangFeatures) => Set<string> | undefined;
}

const READS: Read[] = [
  {
    what: '/generate',
    schema: GenerateResponseSchema,
    when: () => true,
    keys: (s) => producedFor(s, 'generate', 'answer'),
  },
  {
    what: '/generate meta_info',
    schema: GenerateMetaInfoSchema,
    when: () => true,
    keys: (s) => producedFor(s, 'generate.meta_info', 'answer'),
  },
  {
    what: '/generate stream chunk',
    schema: GenerateStreamChunkSchema,
    when: () => true,
    keys: (s) => producedFor(s, 'generate', 'stream'),
  },
  {
    what: '/generate stream chunk meta_info',
    schema: GenerateMetaInfoSchema,
    when: () => true,
    keys: (s) => producedFor(s, 'generate.meta_info', 'stream'),
  },
  {
    what: '/get_load entry',
    schema: LoadEntrySchema,
    when: (f) => f.loadFrom === '/get_load',
    keys: (s) => routeKeys(s, '/get_load') ?? new Set(Object.keys(s.answers['get_load[]']?.fields ?? {})),
  },
  {
    what: '/get_load token total',
    schema: LoadTotalSchema,
    when: (f) => f.loadFrom === '/get_load (token total)',
    keys: (s) => new Set(Object.keys(s.answers['get_load[]']?.fields ?? {})),
  },
  // /v1/loads against every release that serves it, not only where the client needs it: a fallback must parse.
  {
    what: '/v1/loads',
    schema: V1LoadsSchema,
    when: (f) => f.loadFrom === '/v1/loads' || routeOfVersion(f, '/v1/loads'),
    keys: (s) => routeKeys(s, '/v1/loads'),
  },
  {
    what: '/v1/loads entry',
    schema: field(V1LoadsSchema, 'loads'),
    when: (f) => f.loadFrom === '/v1/loads' || routeOfVersion(f, '/v1/loads'),
    keys: (s) => {
      const e = s.answers['v1/loads.loads[]'];
      if (e === undefined) return undefined;
      return new Set(
        Object.entries(e.fields)
          .filter(([, a]) => a.some((g) => g.length === 0))
          .map(([k]) => k),
      );
    },
  },
  {
    what: 'model info',
    schema: ModelInfoSchema,
    when: () => true,
    keys: (s, f) => routeKeys(s, f.modelInfoPath ?? '/model_info'),
  },
  {
    what: 'server info',
    schema: ServerInfoSchema,
    when: () => true,
    keys: (s, f) => routeKeys(s, f.serverInfoPath ?? '/server_info'),
  },
  {
    what: '/get_weight_version',
    schema: WeightVersionSchema,
    when: (f) => f.weightVersionFrom === '/get_weight_version',
    keys: (s) => routeKeys(s, '/get_weight_version'),
  },
  {
    what: 'model info as the weight version (required there: else every engine reads null)',
    schema: z.object({ weight_version: z.string().nullable() }),
    when: (f) => f.weightVersionFrom === 'model_info',
    keys: (s, f) => routeKeys(s, f.modelInfoPath ?? '/model_info'),
  },
  ...['/pause_generation', '/continue_generation'].map((path) => ({
    what: path,
    schema: StatusMessageSchema,
    when: () => true,
    keys: (s: Surface) => routeKeys(s, path),
  })),
  {
    what: '/update_weights_from_disk',
    schema: UpdateWeightsFromDiskResponseSchema,
    when: () => true,
    keys: (s) => routeKeys(s, '/update_weights_from_disk'),
  },
  ...['/init_weights_update_group', '/update_weights_from_distributed', '/destroy_weights_update_group'].map(
    (path) => ({
      what: path,
      schema: SuccessMessageSchema,
      when: (f: SGLangFeatures) => path !== '/destroy_weights_update_group' || f.destroyWeightsUpdateGroup,
      keys: (s: Surface) => routeKeys(s, path),
    }),
  ),
  {
    what: '/update_weight_version',
    schema: UpdateWeightVersionResponseSchema,
    when: (f) => f.updateWeightVersion,
    keys: (s) => routeKeys(s, '/update_weight_version'),
  },
  // OpenAI answers are pydantic models returned whole: every field of the class is in the JSON.
  ...(
    [
      [ChatCompletionResponseSchema, 'ChatCompletionResponse'],
      [field(ChatCompletionResponseSchema, 'choices'), 'ChatCompletionResponseChoice'],
      [field(objectOf(field(ChatCompletionResponseSchema, 'choices')), 'message'), 'ChatMessage'],
      [field(ChatCompletionResponseSchema, 'usage'), 'UsageInfo'],
      [ChatCompletionChunkSchema, 'ChatCompletionStreamResponse'],
      [field(ChatCompletionChunkSchema, 'choices'), 'ChatCompletionResponseStreamChoice'],
      [field(objectOf(field(ChatCompletionChunkSchema, 'choices')), 'delta'), 'DeltaMessage'],
      [CompletionResponseSchema, 'CompletionResponse'],
      [field(CompletionResponseSchema, 'choices'), 'CompletionResponseChoice'],
      [ModelListSchema, 'ModelList'],
      [field(ModelListSchema, 'data'), 'ModelCard'],
    ] as const
  ).map(([schema, cls]) => ({
    what: cls,
    schema,
    when: () => true,
    keys: (s: Surface) => (s.classes[cls] === undefined ? undefined : classKeys(s, cls)),
  })),
];

function routeOfVersion(f: SGLangFeatures, path: string): boolean {
  return routeOf(surfaceOf(f.version)!, path) !== undefined;
}

/** Every required field some release does not produce: `what.field: versions`. */
function missingFields(): Record<string, string[]> {
  const missing: Record<string, string[]> = {};
  const note = (key: string, v: string) => {
    missing[key] = [...(missing[key] ?? []), v];
  };
  for (const v of SGLANG_VERSIONS) {
    const surface = surfaceOf(v)!;
    const f = sglangFeatures(surface);
    for (const read of READS) {
      if (!read.when(f)) continue;
      const keys = read.keys(surface, f);
      if (keys === undefined) {
        note(`${read.what}: the surface cannot say`, v);
        continue;
      }
      for (const k of required(read.schema)) if (!keys.has(k)) note(`${read.what}.${k}`, v);
    }
  }
  return missing;
}

describe('every answer field the client requires is produced by each supported SGLang release', () => {
  it('no required field is missing from any release (read from each release source)', () => {
    expect(missingFields()).toEqual({});
  });

  it('reads each answer from where the release builds it', () => {
    for (const v of SGLANG_VERSIONS) {
      const s = surfaceOf(v)!;
      expect(s.answers.generate?.source, v).toMatch(/tokenizer_manager\.py:_handle_batch_output$/);
      expect(Object.keys(s.answers['generate.meta_info']?.fields ?? {}), v).toEqual(
        expect.arrayContaining([
          'id',
          'finish_reason',
          'prompt_tokens',
          'completion_tokens',
          'cached_tokens',
        ]),
      );
    }
    // 0.5.2's /get_load is the tokenizer manager's one token total; 0.5.10's /v1/loads entry is a dataclass.
    expect(surfaceOf('0.5.2')!.answers['get_load[]']?.fields).toEqual({ load: [[]] });
    expect(surfaceOf('0.5.10.post1')!.answers['v1/loads.loads[]']?.source).toContain('GetLoadsReqOutput');
    expect(surfaceOf('0.5.23')!.answers['v1/loads.loads[]']?.source).toContain('LoadSnapshot.to_dict');
  });

  it('0.5.9 and 0.5.10.post1 /v1/loads entries have no num_total_tokens: why our schema leaves it optional', () => {
    const without = SGLANG_VERSIONS.filter((v) => {
      const s = surfaceOf(v)!;
      const keys = READS.find((r) => r.what === '/v1/loads entry')!.keys(s, sglangFeatures(s));
      return keys !== undefined && !keys.has('num_total_tokens');
    });
    expect(without).toEqual(['0.5.9', '0.5.10.post1']);
    expect(required(field(V1LoadsSchema, 'loads'))).not.toContain('num_total_tokens');
  });
});
