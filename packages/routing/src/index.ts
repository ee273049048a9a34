export { sseData } from '@uis/spec';
export {
  affinityMessage,
  affinityPrefix,
  affinitySuffix,
  pythonJsonString,
  rendezvousSha256,
} from './affinity-hash.ts';
export { answerVersionSpans, StreamVersionSpans, type TokenVersionSpan } from './answer-versions.ts';
export { type Candidate, candidatesOf, isEligible } from './candidates.ts';
export { DirectClient, type FetchLike } from './direct-client.ts';
export type { Attempt, CallOptions, DirectClientOptions } from './direct-options.ts';
export { ApproxRadixTree, type PrefixMatch, type RadixTreeOptions, type TenantStats } from './radix-tree.ts';
export {
  ReplicaSelector,
  type ReplicaSelectorOptions,
  type Selection,
  type SelectRequest,
} from './replica-selector.ts';
export {
  type HeaderBag,
  promptText,
  REQUEST_KEY_FIELDS,
  type RequestKeys,
  ROUTE_KEY_HEADER,
  requestKeys,
} from './request-keys.ts';
export { checkSnapshot, type ResolvedModel, type ResolveRequest, resolveModel } from './resolve-model.ts';
export { type Route, route } from './route.ts';
export {
  DEFAULT_AFFINITY_HEADER,
  DEFAULT_POLICY,
  MIN_WEIGHT_VERSION_HEADER,
  policyFor,
  type RoutingRules,
} from './routing-rules.ts';
export { sha256Hex } from './sha256.ts';
export { isStale, type StalenessBound, StalenessRule } from './staleness.ts';
export { compareWeightVersions, meetsMinWeightVersion, versionsBehind } from './weight-version.ts';
