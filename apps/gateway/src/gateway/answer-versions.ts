import type { InferenceManager } from '@uis/manager';
import type { InferenceModelSpec } from '@uis/spec';
import { type BodyEdit, openAIEdit, type ParsedBody } from '../proxy/body.ts';
import { OpenAIStreamVersions } from '../proxy/openai-stream-versions.ts';
import type { ForwardRoute, ProxyTarget } from '../proxy/route-types.ts';

type Versions = NonNullable<ForwardRoute['versions']>;

const NO_EARLIER: ReadonlyArray<string | null> = Object.freeze([]);

/**
 * How a route declares the weights of its answers. Sized answers: the versions a request ran on before its last
 * token's are those its replica served before each in-place switch since it was picked. OpenAI streams, whose
 * chunks name no version in any SGLang release: the engine is asked for `stream_options.continuous_usage_stats`
 * and the relay counts the output tokens at each in-place continue (see OpenAIStreamVersions).
 */
export class AnswerVersions {
  readonly raw: Versions;
  readonly #openAI: Versions;

  /** Models whose OpenAI streams are rewritten (`openai_stream_versions`, weights that can change). */
  readonly #rewritten: ReadonlySet<string>;

  constructor(
    private readonly manager: InferenceManager,
    models: ReadonlyArray<Pick<InferenceModelSpec, 'name' | 'weight_source' | 'openai_stream_versions'>>,
  ) {
    this.#rewritten = new Set(
      models.filter((m) => m.openai_stream_versions && m.weight_source !== 'static').map((m) => m.name),
    );
    // Most requests end with no in-place switch since their pick: one count read, no list made.
    const earlier = (t: ProxyTarget) =>
      t.inPlaceSwitches === undefined || manager.inPlaceSwitches(t.id) <= t.inPlaceSwitches
        ? NO_EARLIER
        : manager.servedBeforeInPlace(t.id, t.inPlaceSwitches);
    this.raw = { openai: false, earlier };
    this.#openAI = { openai: true, earlier };
  }

  /** The declaration of an OpenAI route's answer: per request for a stream (whether the client asked for the
   * usage counts itself), shared otherwise. */
  openAI(model: string, body: ParsedBody): Versions {
    const strip = this.#streamUsage(model, body);
    if (strip === undefined) return this.#openAI;
    const manager = this.manager;
    return {
      ...this.#openAI,
      stream: (t) =>
        new OpenAIStreamVersions(
          strip,
          // An SGLang router's pick: the gateway does not know which engine made the tokens.
          t.inPlaceResumes === undefined ? null : () => manager.resumedInPlace(t.id),
          t.weightVersion ?? null,
          t.inPlaceResumes ?? 0,
        ),
    };
  }

  /** The OpenAI edit (the served model name), and for a stream the usage counts on every chunk. */
  openAIEdit(model: string, servedName: string, body: ParsedBody): BodyEdit {
    const edit = openAIEdit(servedName);
    const strip = this.#streamUsage(model, body);
    if (strip !== true) return edit;
    const options = body.get('stream_options') as Record<string, unknown> | null | undefined;
    return { ...edit, set: { ...edit.set, stream_options: { ...options, continuous_usage_stats: true } } };
  }

  /** For an OpenAI stream of a rewritten model: true when the gateway adds the usage counts (the client did not
   * ask for them), false when the client did; undefined: not one, or `stream_options` the engine refuses anyway
   * (not an object). */
  #streamUsage(model: string, body: ParsedBody): boolean | undefined {
    if (body.fields.stream !== true || !this.#rewritten.has(model)) return undefined;
    const options = body.get('stream_options');
    if (options === undefined || options === null) return true;
    if (typeof options !== 'object' || Array.isArray(options)) return undefined;
    return (options as Record<string, unknown>).continuous_usage_stats !== true;
  }
}
