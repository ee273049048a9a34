import type { DiscoverySnapshot } from '@uis/spec';
import { compareWeightVersions, versionsBehind } from './weight-version.ts';

/** Versions remembered per model (to count versions that are not plain numbers). */
const KEPT_VERSIONS = 256;

/** A model's `max_staleness` on one topology: a request in flight that started on a version `behind` more than
 * `maxStaleness` versions of `newest` is aborted (with its partial output) and resumed by its caller. */
export interface StalenessBound {
  model: string;
  maxStaleness: number;
  /** The newest version among the model's own and its replicas'. */
  newest: string;
  /** Versions `version` is behind `newest` (versionsBehind over every version of the model seen so far). */
  behind(version: string): number;
}

/** True when a request that started on `version` is past its model's bound (a request without a version never
 * is: nothing says how old it is). */
export function isStale(bound: StalenessBound, version: string | null | undefined): boolean {
  return typeof version === 'string' && bound.behind(version) > bound.maxStaleness;
}

/**
 * The in-flight staleness rule, one for the gateway (requests it holds) and the direct clients (requests they
 * send to engines themselves): per published topology, each model with a `max_staleness` and a known version gets
 * its bound. Versions are remembered across topologies, so versions that are not plain numbers count by the
 * distinct versions the model went through, as routing counts them.
 */
export class StalenessRule {
  /** Each model's versions seen so far, oldest first. */
  readonly #seen = new Map<string, string[]>();

  /** The bounds of `snapshot`'s models that have one (and remembers every model's versions). */
  bounds(snapshot: DiscoverySnapshot): StalenessBound[] {
    const out: StalenessBound[] = [];
    for (const [model, m] of Object.entries(snapshot.models)) {
      const versions = [m.weight_version, ...m.engines.map((e) => e.weight_version)].filter(
        (v): v is string => typeof v === 'string',
      );
      // A copy: the bound counts the versions known on this topology, whenever it is asked.
      const known = [...this.#remember(model, versions)];
      const max = m.max_staleness;
      if (max === undefined || versions.length === 0) continue;
      const newest = versions.reduce((a, b) => (compareWeightVersions(b, a) > 0 ? b : a));
      out.push({ model, maxStaleness: max, newest, behind: (v) => versionsBehind(v, newest, known) });
    }
    return out;
  }

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
