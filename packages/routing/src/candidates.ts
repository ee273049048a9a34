import type { DiscoveryEngine, DiscoveryModel } from '@uis/spec';
import { affinitySuffix } from './affinity-hash.ts';
import { compareWeightVersions, meetsMinWeightVersion, versionsBehind } from './weight-version.ts';

/** A replica a request may be sent to directly. */
export interface Candidate {
  engineId: string;
  url: string;
  weightVersion: string | null;
  /** The end of this replica's affinity message (`"<engine id>"]`), encoded once per snapshot. */
  affinitySuffix: Uint8Array;
}

const cache = new WeakMap<DiscoveryModel, readonly Candidate[]>();

/** A replica is a candidate when it is ready, direct_eligible, has a URL, is a regular worker (PD prefill and
 * decode workers are diagnostic only: only a router can pair them), is not quarantined (its update failed in a
 * weight switch) and is not below its model's weight version (a client reading a snapshot a switch left behind
 * never picks a replica the model moved past). */
export function isEligible(engine: DiscoveryEngine, modelVersion?: string | null): boolean {
  return (
    engine.state === 'ready' &&
    engine.direct_eligible &&
    engine.base_url !== null &&
    (engine.worker_type === undefined || engine.worker_type === 'regular') &&
    engine.quarantined !== true &&
    (modelVersion === undefined ||
      modelVersion === null ||
      meetsMinWeightVersion(engine.weight_version, modelVersion))
  );
}

/** The engines of a model with a `max_staleness` that are at most that many versions behind the newest version
 * among them and the model's own (a replica without a version is never within a bound). */
function withinStaleness(engines: DiscoveryEngine[], entry: DiscoveryModel, max: number): DiscoveryEngine[] {
  const known = engines.map((e) => e.weight_version).filter((v): v is string => typeof v === 'string');
  if (typeof entry.weight_version === 'string') known.push(entry.weight_version);
  if (known.length === 0) return [];
  const newest = known.reduce((a, b) => (compareWeightVersions(b, a) > 0 ? b : a));
  return engines.filter(
    (e) => typeof e.weight_version === 'string' && versionsBehind(e.weight_version, newest, known) <= max,
  );
}

/** The model's candidates in discovery order; computed once per model entry (entries of a snapshot are never
 * mutated, a new topology is a new snapshot), so a routing decision does not re-filter the engine list. With a
 * `max_staleness`, only replicas within it of the newest version count (see withinStaleness). */
export function candidatesOf(entry: DiscoveryModel): readonly Candidate[] {
  let list = cache.get(entry);
  if (list === undefined) {
    const eligible = entry.engines.filter((engine) => isEligible(engine, entry.weight_version));
    const max = entry.max_staleness;
    list = (max === undefined ? eligible : withinStaleness(eligible, entry, max)).map((engine) => ({
      engineId: engine.engine_id,
      url: engine.base_url!,
      weightVersion: engine.weight_version ?? null,
      affinitySuffix: affinitySuffix(engine.engine_id),
    }));
    cache.set(entry, list);
  }
  return list;
}
