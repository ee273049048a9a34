import { StalenessRule } from '@uis/routing';
import type { DiscoverySnapshot } from '@uis/spec';
import type { AbortTargets, HeldRequests } from './held-requests.ts';
import type { Audit } from './replicas/types.ts';

/**
 * Holds requests in flight to their model's `max_staleness`: on every published topology, a held request that
 * started on a version more than the bound behind the newest one (the model's own or a replica's, as routing
 * counts it) is aborted with its partial output (HeldRequests.abortStale: reason `max_staleness`), e.g. one that
 * spanned several in-place switches, or runs on a replica a `mixed_versions: allow` switch left behind. The
 * trainer resumes it on the new weights; its answer's spans say which version made which token. The rule is
 * @uis/routing's StalenessRule, the one the direct clients apply to the requests they send themselves.
 */
export class StalenessGuard {
  readonly #rule = new StalenessRule();

  constructor(
    private readonly requests: HeldRequests,
    private readonly targets: AbortTargets,
    private readonly audit: Audit,
  ) {}

  readonly onPublished = (snapshot: DiscoverySnapshot): void => {
    for (const bound of this.#rule.bounds(snapshot)) {
      const aborted = this.requests.abortStale(bound, this.targets);
      if (aborted.length > 0)
        this.audit('requests.stale_abort', bound.model, {
          newest: bound.newest,
          max_staleness: bound.maxStaleness,
          rids: aborted.map((a) => a.rid),
        });
    }
  };
}
