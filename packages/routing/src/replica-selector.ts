import {
  type CacheAwareOptions,
  CacheAwareOptionsSchema,
  type DiscoveryModel,
  type ReplicaPolicy,
  UisError,
} from '@uis/spec';
import { affinityPrefix, rendezvousSha256 } from './affinity-hash.ts';
import { type Candidate, candidatesOf } from './candidates.ts';
import { ApproxRadixTree, type TenantStats } from './radix-tree.ts';
import type { ResolvedModel } from './resolve-model.ts';
import { compareWeightVersions, meetsMinWeightVersion } from './weight-version.ts';

export interface SelectRequest {
  /** The affinity key (header `X-SMG-Routing-Key`, or the direct client's `affinityKey`): the request is keyed
   * whatever the model's policy, as Relax's resolver keys it. */
  affinityKey?: string | null | undefined;
  /** The body's session id or rid: keys the request under the `affinity` policy only. */
  sessionKey?: string | null | undefined;
  /** Only replicas at or above this weight version are candidates (header `X-Min-Weight-Version`). */
  minWeightVersion?: string | null | undefined;
  /** Prompt text; used by `cache_aware`. */
  prompt?: string | null | undefined;
  /** Engine ids not to pick (a replica that just failed). */
  exclude?: ReadonlySet<string> | undefined;
}

export interface Selection {
  model: string;
  /** Where to send the request: a replica's base URL, or the model's router URL in router mode. */
  url: string;
  /** The chosen replica, or null in router mode. */
  engineId: string | null;
  /** The chosen replica's weight version in the snapshot; in router mode the version every ready worker serves
   * when they agree, else null. */
  weightVersion: string | null;
  viaRouter: boolean;
  policy: ReplicaPolicy;
  /** Why this replica, for logs and tests. */
  reason:
    | 'router'
    | 'round_robin'
    | 'least_outstanding'
    | 'affinity'
    | 'cache_match'
    | 'cache_smallest'
    | 'cache_balance';
}

export interface ReplicaSelectorOptions {
  /** In-flight requests per engine as the caller counts them; default: the selector's own acquire/release. */
  inFlight?: (engineId: string) => number;
  /** cache_aware thresholds (defaults as sgl-model-gateway: 0.3, 64, 1.5; tree bound 1 Mi chars per replica). */
  cacheAware?: Partial<CacheAwareOptions> | undefined;
}

interface Counter {
  n: number;
}

interface Slot {
  cand: Candidate;
  counter: Counter;
  stats: TenantStats | null;
}

interface ModelState {
  epoch: string;
  rr: number;
  list: readonly Candidate[] | null;
  slots: Slot[];
  tree: ApproxRadixTree | null;
  /** Slots at or above a min weight version, per version asked (bounded), for the current list. */
  byMinVersion: Map<string, Slot[] | UisError>;
  /** Affinity winners among all of the current list's slots, per key (bounded): a GRPO group's samples and a
   * multi-turn session repeat their key, and the list changes only with the topology. */
  winners: Map<string, Slot>;
}

const MIN_VERSION_CACHE = 32;
/** Keys remembered per model and topology; past it the memory starts over (a full scan costs one SHA-256 per
 * replica, so a miss is slower, never wrong). */
const AFFINITY_WINNERS = 65536;

const RR_WRAP = 0x40000000;

/** Picks a replica of a resolved model by the model's policy. Stateful (round-robin counters, in-flight counts,
 * cache-aware trees) but deterministic given its inputs: no clock, no randomness. Round-robin counters and trees
 * reset when the registry epoch changes (a restarted manager restarts its replicas and revisions). */
export class ReplicaSelector {
  private readonly models = new Map<string, ModelState>();
  private readonly counters = new Map<string, Counter>();
  private readonly inFlightFn: ((engineId: string) => number) | undefined;
  private readonly cacheOptions: CacheAwareOptions;

  constructor(options: ReplicaSelectorOptions = {}) {
    this.inFlightFn = options.inFlight;
    this.cacheOptions = CacheAwareOptionsSchema.parse(options.cacheAware ?? {});
  }

  /** Counts a request started on `engineId`. */
  acquire(engineId: string): void {
    this.counter(engineId).n++;
  }

  /** Counts a request finished on `engineId` (success or failure). */
  release(engineId: string): void {
    const counter = this.counter(engineId);
    if (counter.n > 0) counter.n--;
  }

  inFlight(engineId: string): number {
    return this.inFlightFn ? this.inFlightFn(engineId) : (this.counters.get(engineId)?.n ?? 0);
  }

  /** The cache-aware tree of a model (for metrics and tests), if the model has used cache_aware. */
  treeOf(model: string): ApproxRadixTree | null {
    return this.models.get(model)?.tree ?? null;
  }

  select(model: ResolvedModel, request: SelectRequest = {}): Selection | UisError {
    const entry = model.entry;
    if (entry.router_url !== null) {
      const min = request.minWeightVersion;
      // The router picks the worker; what can be checked here is that some ready worker serves the version.
      if (min !== undefined && min !== null && min !== '') {
        const ready = entry.engines.filter((e) => e.state === 'ready');
        if (!ready.some((e) => meetsMinWeightVersion(e.weight_version, min))) {
          const versions = [...new Set(ready.map((e) => e.weight_version ?? '(none)'))];
          return new UisError({
            code: 'no_replica_at_version',
            path: 'headers.x-min-weight-version',
            message: `model "${model.name}" (router mode) has no ready worker at weight version >= ${min}; versions served: ${versions.join(', ') || '(no ready worker)'}`,
            details: { model: model.name, min_weight_version: min, versions, retry_after_s: 1 },
          });
        }
      }
      return {
        model: model.name,
        url: entry.router_url,
        engineId: null,
        weightVersion: commonVersion(entry),
        viaRouter: true,
        policy: model.policy,
        reason: 'router',
      };
    }
    const state = this.stateFor(model);
    const slots = this.eligibleSlots(model, state, request);
    if (slots instanceof UisError) return slots;
    const key = request.affinityKey || (model.policy === 'affinity' ? request.sessionKey : undefined);
    if (key) return this.affinity(model, state, slots, key);
    switch (model.policy) {
      case 'round_robin':
        return this.pick(model, slots[this.nextRr(state) % slots.length]!, 'round_robin');
      case 'least_outstanding':
        return this.pick(model, this.leastLoaded(state, slots), 'least_outstanding');
      case 'affinity':
        return this.pick(model, slots[this.nextRr(state) % slots.length]!, 'round_robin');
      case 'cache_aware':
        return this.cacheAware(model, state, slots, request.prompt ?? '');
    }
  }

  private counter(engineId: string): Counter {
    let counter = this.counters.get(engineId);
    if (counter === undefined) {
      counter = { n: 0 };
      this.counters.set(engineId, counter);
    }
    return counter;
  }

  private load(slot: Slot): number {
    return this.inFlightFn ? this.inFlightFn(slot.cand.engineId) : slot.counter.n;
  }

  private nextRr(state: ModelState): number {
    const value = state.rr;
    state.rr = (value + 1) % RR_WRAP;
    return value;
  }

  private stateFor(model: ResolvedModel): ModelState {
    let state = this.models.get(model.name);
    if (state === undefined || state.epoch !== model.registryEpoch) {
      state = {
        epoch: model.registryEpoch,
        rr: 0,
        list: null,
        slots: [],
        tree: null,
        byMinVersion: new Map(),
        winners: new Map(),
      };
      this.models.set(model.name, state);
    }
    const list = candidatesOf(model.entry);
    if (state.list !== list) {
      if (state.tree !== null) state.tree.retainTenants(new Set(list.map((c) => c.engineId)));
      state.list = list;
      state.byMinVersion.clear();
      state.winners.clear();
      state.slots = list.map((cand) => ({
        cand,
        counter: this.counter(cand.engineId),
        stats: state!.tree?.statsFor(cand.engineId) ?? null,
      }));
    }
    return state;
  }

  private eligibleSlots(model: ResolvedModel, state: ModelState, request: SelectRequest): Slot[] | UisError {
    const all = state.slots;
    if (all.length === 0) return noEligible(model.name, model.entry);
    const min = request.minWeightVersion;
    const exclude = request.exclude;
    const hasMin = min !== undefined && min !== null && min !== '';
    const hasExclude = exclude !== undefined && exclude.size > 0;
    if (!hasMin && !hasExclude) return all;
    const atVersion = hasMin ? this.atMinVersion(model, state, min) : all;
    if (atVersion instanceof UisError) return atVersion;
    const slots = hasExclude ? atVersion.filter((s) => !exclude.has(s.cand.engineId)) : atVersion;
    if (slots.length === 0) {
      return new UisError({
        code: 'no_eligible_replica',
        path: 'body.model',
        message: `model "${model.name}": every eligible replica was excluded after failing (${[...exclude!].join(', ')})`,
        details: { model: model.name, excluded: [...exclude!], retry_after_s: 1 },
      });
    }
    return slots;
  }

  /** Filtering by version is O(replicas); requests of one phase ask for the same few versions, so the result is
   * kept per version until the candidate list changes. */
  private atMinVersion(model: ResolvedModel, state: ModelState, min: string): Slot[] | UisError {
    const cached = state.byMinVersion.get(min);
    if (cached !== undefined) return cached;
    const all = state.slots;
    let result: Slot[] | UisError = all.filter((s) => meetsMinWeightVersion(s.cand.weightVersion, min));
    if (result.length === 0) {
      const reported = all.map((s) => s.cand.weightVersion).filter((v): v is string => v !== null);
      const versions = [...new Set(reported)].sort(compareWeightVersions);
      if (reported.length < all.length) versions.push('(none)');
      result = new UisError({
        code: 'no_replica_at_version',
        path: 'headers.x-min-weight-version',
        message: `model "${model.name}" has no eligible replica at weight version >= ${min}; versions served: ${versions.join(', ')}`,
        details: { model: model.name, min_weight_version: min, versions, retry_after_s: 1 },
      });
    }
    if (state.byMinVersion.size >= MIN_VERSION_CACHE) state.byMinVersion.clear();
    state.byMinVersion.set(min, result);
    return result;
  }

  private pick(model: ResolvedModel, slot: Slot, reason: Selection['reason']): Selection {
    return {
      model: model.name,
      url: slot.cand.url,
      engineId: slot.cand.engineId,
      weightVersion: slot.cand.weightVersion,
      viaRouter: false,
      policy: model.policy,
      reason,
    };
  }

  /** Fewest in-flight; ties go to the first tied replica at or after the round-robin cursor. */
  private leastLoaded(state: ModelState, slots: Slot[]): Slot {
    const n = slots.length;
    const start = this.nextRr(state) % n;
    let best = slots[start]!;
    let bestLoad = this.load(best);
    for (let i = 1; i < n && bestLoad > 0; i++) {
      const slot = slots[(start + i) % n]!;
      const load = this.load(slot);
      if (load < bestLoad) {
        best = slot;
        bestLoad = load;
      }
    }
    return best;
  }

  /** Relax's rendezvous rule (affinity-hash.ts): the replica with the largest SHA-256 of
   * `[role, model, key, engine_id]`. A key keeps its replica while that replica stays eligible, and adding or
   * removing one of N replicas moves only ~1/N of keys. Winners among all slots are remembered per key until the
   * topology changes; a request that filters the slots (weight version, exclusions) is decided afresh. */
  private affinity(model: ResolvedModel, state: ModelState, slots: Slot[], key: string): Selection {
    const whole = slots === state.slots;
    const known = whole ? state.winners.get(key) : undefined;
    if (known !== undefined) return this.pick(model, known, 'affinity');
    const winner = slots[rendezvousSha256(affinityPrefix(model.role, model.name, key), slots, suffixOf)]!;
    if (whole) {
      if (state.winners.size >= AFFINITY_WINNERS) state.winners.clear();
      state.winners.set(key, winner);
    }
    return this.pick(model, winner, 'affinity');
  }

  /** sgl-model-gateway's cache_aware: when load is imbalanced past both thresholds, the shortest queue; otherwise
   * the replica whose tree matches the longest prefix if the match covers more than cache_threshold of the prompt;
   * otherwise the replica with the smallest tree. The prompt is then recorded in the chosen replica's tree. */
  private cacheAware(model: ResolvedModel, state: ModelState, slots: Slot[], prompt: string): Selection {
    if (state.tree === null) {
      state.tree = new ApproxRadixTree({ maxTenantChars: this.cacheOptions.max_tree_chars });
      for (const slot of state.slots) slot.stats = state.tree.statsFor(slot.cand.engineId);
    }
    const tree = state.tree;
    const opts = this.cacheOptions;
    const n = slots.length;
    const start = this.nextRr(state) % n;
    // Scans start at the round-robin cursor so ties rotate; two loops avoid a modulo per replica.
    let minLoad = Number.POSITIVE_INFINITY;
    let maxLoad = 0;
    let minSlot = slots[start]!;
    const fn = this.inFlightFn;
    for (let pass = 0; pass < 2; pass++) {
      const from = pass === 0 ? start : 0;
      const to = pass === 0 ? n : start;
      for (let i = from; i < to; i++) {
        const slot = slots[i]!;
        const load = fn === undefined ? slot.counter.n : fn(slot.cand.engineId);
        if (load < minLoad) {
          minLoad = load;
          minSlot = slot;
        }
        if (load > maxLoad) maxLoad = load;
      }
    }
    let chosen: Slot | undefined;
    let reason: Selection['reason'];
    if (maxLoad - minLoad > opts.balance_abs_threshold && maxLoad > minLoad * opts.balance_rel_threshold) {
      chosen = minSlot;
      reason = 'cache_balance';
    } else {
      if (prompt.length > 0) {
        const accept = slots === state.slots ? undefined : acceptor(slots);
        const match = tree.prefixMatch(prompt, accept);
        if (match.tenant !== null && match.tenantMatchedChars / prompt.length > opts.cache_threshold) {
          chosen = findSlot(state, match.tenant, accept === undefined ? undefined : slots);
        }
      }
      if (chosen !== undefined) {
        reason = 'cache_match';
      } else {
        chosen = smallestTree(slots, start);
        reason = 'cache_smallest';
      }
    }
    if (prompt.length > 0) tree.insert(prompt, chosen.cand.engineId);
    return this.pick(model, chosen, reason);
  }
}

const suffixOf = (slot: Slot) => slot.cand.affinitySuffix;

const acceptors = new WeakMap<Slot[], (tenant: string) => boolean>();

/** The replica whose tree holds the fewest characters, ties to the first at or after `start`. */
function smallestTree(slots: Slot[], start: number): Slot {
  let best = slots[start]!;
  let bestChars = best.stats!.chars;
  for (let pass = 0; pass < 2 && bestChars > 0; pass++) {
    const from = pass === 0 ? start + 1 : 0;
    const to = pass === 0 ? slots.length : start;
    for (let i = from; i < to; i++) {
      const chars = slots[i]!.stats!.chars;
      if (chars < bestChars) {
        best = slots[i]!;
        bestChars = chars;
        if (chars === 0) break;
      }
    }
  }
  return best;
}

function acceptor(slots: Slot[]): (tenant: string) => boolean {
  let accept = acceptors.get(slots);
  if (accept === undefined) {
    const ids = new Set(slots.map((s) => s.cand.engineId));
    accept = (tenant) => ids.has(tenant);
    acceptors.set(slots, accept);
  }
  return accept;
}

const slotIndex = new WeakMap<Slot[], Map<string, Slot>>();

function findSlot(state: ModelState, engineId: string, among?: Slot[]): Slot | undefined {
  const slots = among ?? state.slots;
  let index = slotIndex.get(slots);
  if (index === undefined) {
    index = new Map(slots.map((s) => [s.cand.engineId, s]));
    slotIndex.set(slots, index);
  }
  return index.get(engineId);
}

function commonVersion(entry: DiscoveryModel): string | null {
  let version: string | null = null;
  for (const e of entry.engines) {
    if (e.state !== 'ready') continue;
    const v = e.weight_version ?? null;
    if (v === null || (version !== null && v !== version)) return null;
    version = v;
  }
  return version;
}

function noEligible(name: string, entry: DiscoveryModel): UisError {
  const states = entry.engines.map(
    (e) => `${e.engine_id}=${e.state}${e.direct_eligible ? '' : ' (not direct_eligible)'}`,
  );
  return new UisError({
    code: 'no_eligible_replica',
    path: 'body.model',
    message: `model "${name}" has no ready, direct_eligible replica with a URL (${states.length === 0 ? 'no replicas' : states.join(', ')})`,
    details: { model: name, engines: states, retry_after_s: 1 },
  });
}
