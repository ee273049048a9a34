import type { CacheAwareOptions, DiscoveryRouting, ReplicaPolicy, RoutingSpec } from '@uis/spec';

/** The routing rules a resolver needs: the role's `RoutingSpec` (gateway, from config) or the `routing` block of a
 * discovery snapshot (direct client). Both shapes are accepted so nobody converts between them by hand. */
export interface RoutingRules {
  default_model?: string | null;
  route_keys?: Readonly<Record<string, string>>;
  aliases?: Readonly<Record<string, string>>;
  policy?: ReplicaPolicy;
  model_policies?: Readonly<Record<string, ReplicaPolicy>>;
  affinity_header?: string;
  cache_aware?: Partial<CacheAwareOptions>;
}

// Compile-time proof that both published shapes are RoutingRules.
export type _SpecIsRules = RoutingSpec extends RoutingRules ? true : never;
export type _DiscoveryIsRules = DiscoveryRouting extends RoutingRules ? true : never;

export const DEFAULT_AFFINITY_HEADER = 'x-smg-routing-key';
export const MIN_WEIGHT_VERSION_HEADER = 'x-min-weight-version';
export const DEFAULT_POLICY: ReplicaPolicy = 'round_robin';

export function policyFor(rules: RoutingRules | undefined, model: string): ReplicaPolicy {
  return rules?.model_policies?.[model] ?? rules?.policy ?? DEFAULT_POLICY;
}
