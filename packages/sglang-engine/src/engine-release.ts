import { UisError } from '@uis/spec';
import type { SGLangClient } from './client.ts';
import { isEngineError } from './engine-error.ts';
import { featuresForVersion, releasesThatCan, type SGLangFeatures } from './sglang-features.ts';

/** The SGLang release one engine runs (the `version` of its server info) and what that release can do. Unknown
 * until read: operations are then not checked (the engine answers for itself). */
export class EngineRelease {
  private known: SGLangFeatures | undefined;

  constructor(private readonly engineId: string) {}

  /** The engine's SGLang version, once read. */
  get version(): string | undefined {
    return this.known?.version;
  }

  get features(): SGLangFeatures | undefined {
    return this.known;
  }

  /** Reads the version from server info (`/server_info`, or `/get_server_info` on older engines). An engine that
   * does not answer it stays unknown: reading the version must not fail a start. */
  async read(client: SGLangClient): Promise<string | undefined> {
    try {
      this.learn((await client.serverInfo({ timeoutMs: 10_000 })).version);
    } catch (e) {
      if (!isEngineError(e)) throw e;
    }
    return this.version;
  }

  /** Records the version a server info answer reported (an adopted engine's is read by the adoption probe). */
  learn(version: string): void {
    this.known = featuresForVersion(version);
  }

  /** Refuses, before any call, an operation the engine's release cannot do, naming the release and the releases
   * that can. */
  require(can: (f: SGLangFeatures) => boolean, what: string): void {
    const f = this.known;
    if (f === undefined || can(f)) return;
    const able = releasesThatCan(can);
    throw new UisError({
      code: 'sglang_feature_unsupported',
      path: this.engineId,
      message: `${this.engineId} runs SGLang ${f.version}, which cannot ${what}${able.length > 0 ? `; supported releases that can: ${able.join(', ')}` : ''}`,
    });
  }
}
