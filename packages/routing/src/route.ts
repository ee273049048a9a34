import { UisError } from '@uis/spec';
import type { ReplicaSelector, Selection } from './replica-selector.ts';
import type { RequestKeys } from './request-keys.ts';
import { type ResolvedModel, resolveModel } from './resolve-model.ts';
import type { RoutingRules } from './routing-rules.ts';

export interface Route {
  model: ResolvedModel;
  selection: Selection;
}

/** The one routing function: resolve the model, then select a replica. Gateway and direct client both call it. */
export function route(
  snapshot: unknown,
  keys: RequestKeys,
  selector: ReplicaSelector,
  options: { routing?: RoutingRules; exclude?: ReadonlySet<string> } = {},
): Route | UisError {
  const model = resolveModel(snapshot, keys, options.routing);
  if (model instanceof UisError) return model;
  const selection = selector.select(model, {
    affinityKey: keys.affinityKey,
    sessionKey: keys.sessionKey,
    minWeightVersion: keys.minWeightVersion,
    prompt: keys.prompt,
    exclude: options.exclude,
  });
  if (selection instanceof UisError) return selection;
  return { model, selection };
}
