import { type CircuitState, type Clock, systemClock } from '@uis/spec';

export interface BreakerOptions {
  /** false: no circuit ever opens (every replica is always allowed); what the bench's unprotected column runs. */
  enabled?: boolean;
  /** Consecutive failed requests (engine unreachable, timed out, cut, 5xx) that open a replica's circuit. */
  failureThreshold?: number;
  /** How long an open circuit skips its replica before one request probes it. */
  openMs?: number;
  clock?: Clock;
}

interface Circuit {
  failures: number;
  openedAt: number;
  state: CircuitState;
  /** A half-open circuit lets one request through at a time. */
  probing: boolean;
}

/**
 * One circuit breaker per replica, kept by the gateway: `failureThreshold` consecutive failures open it and routing
 * skips the replica; after `openMs` one request probes it (half-open): success closes it, failure opens it again.
 * A replica with no circuit (never failed) costs one map lookup. Written here rather than with cockatiel: the
 * serving path is callback-based (no promise per request to wrap in `execute`), and routing needs to ask "may this
 * replica take a request?" before choosing it, which a policy object does not answer without running the call.
 */
export class ReplicaBreakers {
  private readonly circuits = new Map<string, Circuit>();
  private readonly threshold: number;
  private readonly openMs: number;
  private readonly clock: Clock;
  private readonly enabled: boolean;

  constructor(opts: BreakerOptions = {}) {
    this.enabled = opts.enabled ?? true;
    this.threshold = opts.failureThreshold ?? 5;
    this.openMs = opts.openMs ?? 5000;
    this.clock = opts.clock ?? systemClock;
  }

  /** Whether routing may send a request to `id` now (an open circuit whose time is up turns half-open and lets
   * this one request through as its probe). */
  allows(id: string): boolean {
    const c = this.circuits.get(id);
    if (c === undefined || c.state === 'closed') return true;
    if (c.state === 'open') {
      if (this.clock.now() - c.openedAt < this.openMs) return false;
      c.state = 'half_open';
      c.probing = false;
    }
    if (c.probing) return false;
    c.probing = true;
    return true;
  }

  success(id: string): void {
    this.circuits.delete(id);
  }

  /** A request that ended neither way (the client left): a half-open circuit may probe again. */
  settle(id: string): void {
    const c = this.circuits.get(id);
    if (c !== undefined) c.probing = false;
  }

  failure(id: string): void {
    if (!this.enabled) return;
    let c = this.circuits.get(id);
    if (c === undefined) {
      c = { failures: 0, openedAt: 0, state: 'closed', probing: false };
      this.circuits.set(id, c);
    }
    c.failures++;
    if (c.state === 'half_open' || c.failures >= this.threshold) {
      c.state = 'open';
      c.openedAt = this.clock.now();
      c.probing = false;
    }
  }

  state(id: string): CircuitState {
    const c = this.circuits.get(id);
    if (c === undefined) return 'closed';
    if (c.state === 'open' && this.clock.now() - c.openedAt >= this.openMs) return 'half_open';
    return c.state;
  }

  /** Replicas whose circuit is not closed, with their state (for metrics, discovery and the console). */
  snapshot(): Array<{ engineId: string; state: CircuitState; failures: number }> {
    const out: Array<{ engineId: string; state: CircuitState; failures: number }> = [];
    for (const [engineId, c] of this.circuits) {
      const state = this.state(engineId);
      if (state !== 'closed') out.push({ engineId, state, failures: c.failures });
    }
    return out;
  }
}
