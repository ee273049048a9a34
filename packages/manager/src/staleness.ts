import { compareWeightVersions, versionsBehind } from '@uis/routing';
import type { DiscoverySnapshot } from '@uis/spec';
import type { AbortTargets, HeldRequests } from './held-requests.ts';
import type { Audit } from './replicas/types.ts';

/** Versions remembered per model (to count versions that are not plain numbers). */
const KEPT_VERSIONS = 256;

/**
 * Holds requests in flight to their model's `max_staleness`: on every published topology, a held request that
 * started on a version more than the bound behind the newest one (the model's own or a replica's, as routing
 * counts it) is aborted with its partial output (HeldRequests.abortStale: reason `max_staleness`), e.g. one that
 * spanned several in-place switches, or runs on a replica a `mixed_versions: allow` switch left behind. The
 * trainer resumes it on the new weights; its answer's spans say which version made which token.
 */
export class StalenessGuard {
  /** Each model's versions seen so far, oldest first. */
  readonly #seen = new Map<string, string[]>();

  constructor(
    private readonly requests: HeldRequests,
    private readonly targets: AbortTargets,
    private readonly audit: Audit,
  ) {}

  readonly onPublished = (snapshot: DiscoverySnapshot): void => {
    for (const [name, m] of Object.entries(snapshot.models)) {
      const versions = [m.weight_version, ...m.engines.map((e) => e.weight_version)].filter(
        (v): v is string => typeof v === 'string',
      );
      const known = this.#remember(name, versions);
      const max = m.max_staleness;
      if (max === undefined || versions.length === 0) continue;
      const newest = versions.reduce((a, b) => (compareWeightVersions(b, a) > 0 ? b : a));
      const aborted = this.requests.abortStale(
        name,
        max,
        (v) => versionsBehind(v, newest, known),
        this.targets,
      );
      if (aborted.length > 0)
        this.audit('requests.stale_abort', name, {
          newest,
          max_staleness: max,
          rids: aborted.map((a) => a.rid),
        });
    }
  };

  #remember(model: string, versions: string[]): string[] {
    let seen = this.#seen.get(model);
    if (seen === undefined) {
      seen = [];
      this.#seen.set(model, seen);
    }
    for (const v of versions) if (!seen.includes(v)) seen.push(v);
    if (seen.length > KEPT_VERSIONS) seen.splice(0, seen.length - KEPT_VERSIONS);
    return seen;
  }
}
