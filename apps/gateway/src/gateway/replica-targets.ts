import type { ProxyTarget } from '../proxy/index.ts';
import { ROUTER_PREFIX } from './served-requests.ts';

/** What a replica's target was made from: the same inputs give the same (shared, never written) target. */
interface Made {
  url: string;
  target: ProxyTarget;
}

/** Targets are kept for at most this many replicas, URLs and models (then forgotten and made again). */
const MAX_KEPT = 1024;

/**
 * The proxy targets of a role's replicas and routers, made once per replica state instead of once per request: a
 * replica's target changes only with its URL, its weight version or its count of in-place switches and resumes
 * (a topology publish or a switch), so a request picks the object the previous one got. Origins are parsed once
 * per URL.
 */
export class ReplicaTargets {
  readonly #origins = new Map<string, string>();
  readonly #engines = new Map<string, Made>();
  readonly #routers = new Map<string, Made>();

  /** The target of replica `id` at `url`, serving `weightVersion` after `switches` in-place switches and `resumes`
   * continues. */
  engine(
    id: string,
    url: string,
    weightVersion: string | null,
    switches: number,
    resumes: number,
  ): ProxyTarget {
    const made = this.#engines.get(id);
    if (made !== undefined) {
      const t = made.target;
      if (
        made.url === url &&
        t.weightVersion === weightVersion &&
        t.inPlaceSwitches === switches &&
        t.inPlaceResumes === resumes
      )
        return t;
    }
    const target: ProxyTarget = {
      id,
      origin: this.#origin(url),
      weightVersion,
      inPlaceSwitches: switches,
      inPlaceResumes: resumes,
    };
    if (made === undefined && this.#engines.size >= MAX_KEPT) this.#engines.clear();
    this.#engines.set(id, { url, target });
    return target;
  }

  /** The target of `model`'s SGLang router at `url` (it chose the worker). */
  router(model: string, url: string, weightVersion: string | null): ProxyTarget {
    const made = this.#routers.get(model);
    if (made !== undefined && made.url === url && made.target.weightVersion === weightVersion)
      return made.target;
    const target: ProxyTarget = { id: `${ROUTER_PREFIX}${model}`, origin: this.#origin(url), weightVersion };
    if (made === undefined && this.#routers.size >= MAX_KEPT) this.#routers.clear();
    this.#routers.set(model, { url, target });
    return target;
  }

  /** A replica's origin; URLs are few and stable, so each is parsed once, not per request. */
  #origin(url: string): string {
    let origin = this.#origins.get(url);
    if (origin === undefined) {
      origin = new URL(url).origin;
      if (this.#origins.size >= MAX_KEPT) this.#origins.clear();
      this.#origins.set(url, origin);
    }
    return origin;
  }
}
