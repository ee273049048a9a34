import { randomUUID } from 'node:crypto';
import {
  DISCOVERY_SCHEMA_VERSION,
  type DiscoveryModel,
  type DiscoveryRouting,
  type DiscoverySnapshot,
  DiscoverySnapshotSchema,
  type Role,
  type RoutingSpec,
} from '@uis/spec';

export type RegistryListener = (snapshot: DiscoverySnapshot) => void;

export interface RegistryOptions {
  role: Role;
  routing?: RoutingSpec;
  /** Defaults to a random id per process start: a restarted manager is a new epoch. */
  epoch?: string;
  phase?: string | null;
}

/** What a publisher supplies; the registry stamps schema, role, epoch, routing and revision. */
export interface PublicationDraft {
  models?: Record<string, DiscoveryModel>;
  phase?: string | null;
}

function routingBlock(spec: RoutingSpec | undefined): DiscoveryRouting | undefined {
  if (!spec) return undefined;
  return {
    default_model: spec.default_model ?? null,
    route_keys: { ...spec.route_keys },
    aliases: { ...spec.aliases },
    policy: spec.policy,
    model_policies: { ...spec.model_policies },
  };
}

/** The routing block for these models: the configured route keys, then each model under its own name where no
 * route key has it, the route keys the resolver accepts; and the default model the resolver uses. Published as `route_keys` (Relax's first and third
 * readers) and `route_key_to_model` (its second): each reader then selects a GenRM instance by its name. */
function withRouteKeyMap(
  routing: DiscoveryRouting | undefined,
  models: Record<string, DiscoveryModel>,
): DiscoveryRouting | undefined {
  if (!routing) return undefined;
  const map: Record<string, string> = { ...routing.route_keys };
  const names = Object.keys(models);
  for (const name of names) if (!Object.hasOwn(map, name)) map[name] = name;
  // The only model is the default when none is configured (the resolver's rule); Relax's readers need it named.
  const only = names.length === 1 ? names[0]! : null;
  return {
    ...routing,
    default_model: routing.default_model ?? only,
    route_keys: map,
    route_key_to_model: { ...map },
  };
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** Stable JSON (sorted keys) so an identical publication compares equal whatever the insertion order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The role's discovery registry: one immutable snapshot at a time, swapped atomically. The revision moves only
 * when the published content changes; listeners hear about every move without polling. */
export class Registry {
  readonly role: Role;
  readonly epoch: string;
  /** The configured routing block; each publication adds the models' own names to its route keys. */
  private readonly routing: DiscoveryRouting | undefined;
  private current: DiscoverySnapshot;
  private contentKey: string;
  private readonly listeners = new Set<RegistryListener>();

  constructor(opts: RegistryOptions) {
    this.role = opts.role;
    this.epoch = opts.epoch ?? randomUUID();
    const routing = routingBlock(opts.routing);
    this.routing = routing;
    const initial: DiscoverySnapshot = {
      schema_version: DISCOVERY_SCHEMA_VERSION,
      role: opts.role,
      topology_revision: 0,
      registry_epoch: this.epoch,
      manager_epoch: this.epoch,
      phase: opts.phase ?? null,
      models: {},
      ...(routing ? { routing: withRouteKeyMap(routing, {}) } : {}),
    };
    this.current = deepFreeze(DiscoverySnapshotSchema.parse(initial));
    this.contentKey = Registry.keyOf(this.current);
  }

  private static keyOf(s: DiscoverySnapshot): string {
    return canonical({ phase: s.phase, models: s.models, routing: s.routing });
  }

  get revision(): number {
    return this.current.topology_revision;
  }

  snapshot(): DiscoverySnapshot {
    return this.current;
  }

  /** Validates the whole next snapshot against the discovery schema, then swaps it in. A draft that changes
   * nothing returns the current snapshot with `changed: false` and does not move the revision. */
  publish(draft: PublicationDraft): { snapshot: DiscoverySnapshot; changed: boolean } {
    const next: DiscoverySnapshot = {
      ...this.current,
      phase: draft.phase === undefined ? this.current.phase : draft.phase,
      models: draft.models ?? this.current.models,
      topology_revision: this.current.topology_revision,
    };
    const routing = withRouteKeyMap(this.routing, next.models);
    if (routing) next.routing = routing;
    const key = Registry.keyOf(next);
    if (key === this.contentKey) return { snapshot: this.current, changed: false };
    next.topology_revision = this.current.topology_revision + 1;
    // Parse guards the invariants (e.g. direct_eligible only when ready) before anyone can see the snapshot.
    const parsed = deepFreeze(DiscoverySnapshotSchema.parse(structuredClone(next)));
    this.current = parsed;
    this.contentKey = key;
    for (const listener of [...this.listeners]) {
      try {
        listener(parsed);
      } catch {
        // A faulty subscriber must not break publication for the others.
      }
    }
    return { snapshot: parsed, changed: true };
  }

  subscribe(listener: RegistryListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Long-poll helper: resolves with the first snapshot whose revision is >= `revision`, or with the current
   * snapshot when `timeoutMs` passes or `signal` aborts (the caller compares revisions to see which). */
  waitForRevision(revision: number, timeoutMs: number, signal?: AbortSignal): Promise<DiscoverySnapshot> {
    if (this.current.topology_revision >= revision || signal?.aborted) return Promise.resolve(this.current);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener('abort', done);
        resolve(this.current);
      };
      const unsubscribe = this.subscribe((s) => {
        if (s.topology_revision >= revision) done();
      });
      const timer = setTimeout(done, Math.max(0, timeoutMs));
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
