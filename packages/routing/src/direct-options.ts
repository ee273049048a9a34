import type { Clock } from '@uis/spec';
import type { FetchLike } from './direct-requests.ts';
import type { ReplicaSelectorOptions } from './replica-selector.ts';
import type { RoutingRules } from './routing-rules.ts';

// What a DirectClient is built with and what each call takes.

export interface DirectClientOptions {
  /** A gateway discovery URL, `http://gw/<role>/engines`. Exclusive with `engineUrls`. */
  discoveryUrl?: string;
  /** A static list of engine base URLs serving one model (no discovery, no refresh). */
  engineUrls?: readonly string[];
  /** Model name for `engineUrls` (default `default`). */
  model?: string;
  /** Overrides the snapshot's `routing` block (normally the gateway publishes it). */
  routing?: RoutingRules;
  /** Injected fetch (default: the global one, in browsers and Node). */
  fetch?: FetchLike;
  /** Long-poll window asked of the gateway (`timeout_s`), default 30. */
  longPollTimeoutS?: number;
  /** Interval of plain polling when the gateway ignores `wait_revision`, default 2,000 ms. */
  pollIntervalMs?: number;
  /** How long a replica that refused a connection is skipped locally, default 10,000 ms (discovery usually
   * drops it sooner). */
  failureCooldownMs?: number;
  /** Send a request through the gateway when no replica can take it directly. Off by default: see README. */
  gatewayFallback?: boolean;
  /** Gateway base for the fallback (`http://gw/<role>`); default: the discovery URL without `/engines`. */
  gatewayUrl?: string;
  /** Time source of cool-downs, long-poll timing and the watch loop's backoff (tests pass a ManualClock). */
  clock?: Clock;
  selector?: ReplicaSelectorOptions;
}

export interface CallOptions {
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Overrides the body's `model` for routing. */
  model?: string;
  /** Overrides the body's `route_key` for routing. */
  routeKey?: string;
  /** The request's affinity key (as the `X-SMG-Routing-Key` header would give it): keyed whatever the policy, the
   * replica the gateway and Relax's resolver pick for the same key. */
  affinityKey?: string;
  /** Receives this call's engine attempts as they happen: per call, so concurrent callers each see their own
   * (`lastAttempts` is only the most recently started call's). */
  attempts?: Attempt[];
}

/** Where one request went, for logs and tests. */
export interface Attempt {
  url: string;
  engineId: string | null;
  outcome: 'ok' | 'connection_error' | 'unavailable' | 'rejected' | 'error';
  status?: number;
}
