import { capabilities, type InferenceRoleSpec } from '@uis/spec';
import type { RouterRegistrar } from '../inference-manager.ts';
import { type RouterProcessOptions, SGLangRouterProcess } from './sglang-router-process.ts';

/** The routers of one role: what `InferenceManager` takes as `routers` and `options.routerUrls`. */
export interface ModelRouters {
  routers: Record<string, RouterRegistrar>;
  routerUrls: Record<string, string>;
  processes: Record<string, SGLangRouterProcess>;
  /** Stops every router (after the manager's shutdown has removed the workers). */
  stop(): Promise<void>;
}

/** Starts one real SGLang router per `route_mode: sglang_router` model of the role (policy and args from the
 * model's `router` spec, no initial workers). If one fails to start, the ones already started are stopped. */
export async function startModelRouters(
  role: InferenceRoleSpec,
  opts: Omit<RouterProcessOptions, 'router'> = {},
): Promise<ModelRouters> {
  const processes: Record<string, SGLangRouterProcess> = {};
  const stop = async () => {
    await Promise.allSettled(Object.values(processes).map((p) => p.stop()));
  };
  try {
    for (const model of role.models) {
      if (!capabilities(model).needs_router) continue;
      processes[model.name] = await SGLangRouterProcess.forModel(model, opts);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  const entries = Object.entries(processes);
  return {
    routers: Object.fromEntries(entries.map(([m, p]) => [m, p.registrar])),
    routerUrls: Object.fromEntries(entries.map(([m, p]) => [m, p.url])),
    processes,
    stop,
  };
}
