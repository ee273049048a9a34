import type { ServerResponse } from 'node:http';
import type { RequestKeys, ResolvedModel } from '@uis/routing';
import { UisError } from '@uis/spec';
import { type BodyEdit, type ForwardRoute, ProxyErrorCode, type ProxyTarget } from '../proxy/index.ts';
import type { RequestTrace } from '../tracing/tracing.ts';

/** How a role picks a replica for a resolved request (the gateway's `pick`). */
export interface Picker {
  pick(
    model: ResolvedModel,
    keys: RequestKeys,
    res: ServerResponse,
    excluding: ReadonlySet<string> | undefined,
  ): ProxyTarget | UisError;
}

/** A routed request: what the proxy forwards along, and its replica choice as a method (no closure per request
 * over the model, keys and response it picks with). */
export class GatewayRoute implements ForwardRoute {
  readonly model: string;
  readonly traceparent: string | undefined;
  engineApiKey?: string;
  owner?: ForwardRoute['owner'];

  constructor(
    readonly path: string,
    readonly resolved: ResolvedModel,
    readonly keys: RequestKeys,
    readonly res: ServerResponse,
    readonly picker: Picker,
    readonly versions: ForwardRoute['versions'],
    readonly edit: BodyEdit | undefined,
    /** Tracing on: each pick is an attempt of this trace. */
    readonly trace: RequestTrace | undefined,
  ) {
    this.model = resolved.name;
    this.traceparent = trace?.traceparent;
  }

  pick(excluding?: ReadonlySet<string>): ProxyTarget | UisError {
    const target = this.picker.pick(this.resolved, this.keys, this.res, excluding);
    // The proxy picks again only after an unreachable engine.
    this.trace?.attempt(
      target instanceof UisError ? undefined : target.id,
      excluding === undefined ? undefined : ProxyErrorCode.engineUnreachable,
    );
    return target;
  }
}
