import {
  type DiscoveryModel,
  type DiscoverySnapshot,
  DiscoverySnapshotSchema,
  type ReplicaPolicy,
  type ReplicaState,
  retryGuidance,
  UisError,
  zodIssues,
} from '@uis/spec';
import { policyFor, type RoutingRules } from './routing-rules.ts';

export interface ResolveRequest {
  /** A model id, an alias or a served model name. */
  model?: string | null | undefined;
  /** The route key: mapped to a model by `routing.route_keys` (e.g. OPD's data_source), or a model's own name;
   * body `route_key`. */
  routeKey?: string | null | undefined;
}

export interface ResolvedModel {
  /** The role whose discovery snapshot the model came from (part of the affinity message). */
  role: string;
  /** The model id in discovery. */
  name: string;
  /** The name engines answer to (`model` in an OpenAI body is rewritten to it). */
  servedName: string;
  state: ReplicaState;
  entry: DiscoveryModel;
  policy: ReplicaPolicy;
  /** How the model was chosen. */
  via: 'model' | 'alias' | 'served_name' | 'route_key' | 'default' | 'only_model';
  registryEpoch: string;
  topologyRevision: number;
}

const parsedSnapshots = new WeakMap<object, DiscoverySnapshot | UisError>();

/** Validates a discovery snapshot once per object (cached by identity, so the hot path pays a WeakMap lookup).
 * Snapshots are immutable: publish a new object for a new revision, never mutate one in place.
 * A malformed snapshot is a 503: the caller did nothing wrong, the service cannot route right now. */
export function checkSnapshot(snapshot: unknown): DiscoverySnapshot | UisError {
  if (typeof snapshot !== 'object' || snapshot === null) {
    return new UisError({
      code: 'discovery_malformed',
      path: 'discovery',
      message: `discovery snapshot is not an object (got ${snapshot === null ? 'null' : typeof snapshot})`,
    });
  }
  const cached = parsedSnapshots.get(snapshot);
  if (cached !== undefined) return cached;
  const result = DiscoverySnapshotSchema.safeParse(snapshot);
  let value: DiscoverySnapshot | UisError;
  if (result.success) {
    value = result.data;
  } else {
    const issues = zodIssues(result.error, 'discovery');
    value = new UisError({
      code: 'discovery_malformed',
      path: issues[0]?.path,
      message: `discovery snapshot is malformed: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
      details: issues,
    });
  }
  parsedSnapshots.set(snapshot, value);
  // The parsed copy is also a valid snapshot: cache it too so passing it back is free.
  if (!(value instanceof UisError)) parsedSnapshots.set(value, value);
  return value;
}

function known(snapshot: DiscoverySnapshot, rules: RoutingRules | undefined) {
  return {
    models: Object.keys(snapshot.models),
    aliases: Object.keys(rules?.aliases ?? {}),
    route_keys: Object.keys(rules?.route_keys ?? {}),
    default_model: rules?.default_model ?? null,
  };
}

function list(names: string[]): string {
  return names.length === 0 ? '(none)' : names.join(', ');
}

/** A routing rule names a model discovery does not have: the topology is wrong, not the request (503). */
function inconsistent(
  snapshot: DiscoverySnapshot,
  rules: RoutingRules | undefined,
  path: string,
  what: string,
): UisError {
  return new UisError({
    code: 'routing_inconsistent',
    path,
    message: `${what} is not in discovery (models: ${list(Object.keys(snapshot.models))})`,
    details: known(snapshot, rules),
  });
}

/** Resolves a request to one model: explicit model (id, alias, served name) -> route_key (a configured one, else a
 * model's own name) -> default model -> 400. An unknown model or route_key is a 400 that names what exists; nothing falls back silently. A model that is not
 * ready is a 503 with retry guidance. `routing` defaults to the snapshot's own `routing` block.
 * When nothing is asked, no default is configured and the role serves exactly one model, that model is used:
 * there is nothing to choose. */
export function resolveModel(
  snapshotInput: unknown,
  request: ResolveRequest,
  routing?: RoutingRules,
): ResolvedModel | UisError {
  const snapshot = checkSnapshot(snapshotInput);
  if (snapshot instanceof UisError) return snapshot;
  const rules: RoutingRules | undefined = routing ?? snapshot.routing;
  const models = snapshot.models;
  let name: string | undefined;
  let via: ResolvedModel['via'];

  const asked = request.model ?? undefined;
  if (asked !== undefined && asked !== '') {
    if (Object.hasOwn(models, asked)) {
      name = asked;
      via = 'model';
    } else if (rules?.aliases !== undefined && Object.hasOwn(rules.aliases, asked)) {
      name = rules.aliases[asked]!;
      via = 'alias';
      if (!Object.hasOwn(models, name)) {
        return inconsistent(snapshot, rules, 'body.model', `model "${name}" (alias "${asked}")`);
      }
    } else {
      const byServed = Object.keys(models).filter((m) => models[m]!.served_model_name === asked);
      if (byServed.length !== 1) {
        const k = known(snapshot, rules);
        return new UisError({
          code: 'model_not_served',
          path: 'body.model',
          message: `unknown model "${asked}"; models: ${list(k.models)}; aliases: ${list(k.aliases)}`,
          details: { requested: asked, ...k },
        });
      }
      name = byServed[0]!;
      via = 'served_name';
    }
  } else if (request.routeKey !== undefined && request.routeKey !== null && request.routeKey !== '') {
    const key = request.routeKey;
    // A configured route key first; else a key naming a model selects it (Relax selects a GenRM instance so).
    const target =
      rules?.route_keys !== undefined && Object.hasOwn(rules.route_keys, key)
        ? rules.route_keys[key]
        : Object.hasOwn(models, key)
          ? key
          : undefined;
    if (target === undefined) {
      const k = known(snapshot, rules);
      return new UisError({
        code: 'unknown_route_key',
        path: 'route_key',
        message: `unknown route_key "${key}"; route keys: ${list(k.route_keys)} (a default model is never used for an unknown route_key; send "model" to choose one)`,
        details: { requested: key, ...k },
      });
    }
    if (!Object.hasOwn(models, target)) {
      return inconsistent(snapshot, rules, 'route_key', `model "${target}" (route_key "${key}")`);
    }
    name = target;
    via = 'route_key';
  } else if (rules?.default_model) {
    name = rules.default_model;
    via = 'default';
    if (!Object.hasOwn(models, name)) {
      return inconsistent(snapshot, rules, 'routing.default_model', `default model "${name}"`);
    }
  } else {
    const names = Object.keys(models);
    if (names.length !== 1) {
      const k = known(snapshot, rules);
      return new UisError({
        code: 'model_required',
        path: 'body.model',
        message: `no model asked and no default model configured; send "model" (one of: ${list(k.models)}) or a route_key (${list(k.route_keys)})`,
        details: k,
      });
    }
    name = names[0]!;
    via = 'only_model';
  }

  const entry = models[name]!;
  if (entry.state !== 'ready') {
    const guidance = retryGuidance(entry.state, entry.held === true);
    return new UisError({
      code: 'model_not_ready',
      path: 'body.model',
      // The guidance reads "model is sleeping: why"; the message names the model once instead of repeating it.
      message: `${guidance.reason.replace(/^model /, `model "${name}" `)}; retry after ${guidance.retryAfterSeconds}s`,
      details: {
        model: name,
        state: entry.state,
        ...(entry.held ? { held: true } : {}),
        retry_after_s: guidance.retryAfterSeconds,
        reason: guidance.reason,
      },
    });
  }
  return {
    role: snapshot.role,
    name,
    servedName: entry.served_model_name ?? name,
    state: entry.state,
    entry,
    policy: policyFor(rules, name),
    via,
    registryEpoch: snapshot.registry_epoch ?? '',
    topologyRevision: snapshot.topology_revision,
  };
}
