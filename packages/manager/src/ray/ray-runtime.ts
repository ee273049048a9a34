import type { PlacementPlan } from '@uis/spec';
import { RayBridge, type RayBridgeOptions } from './ray-bridge.ts';
import { RayLauncher, type RayLauncherOptions } from './ray-launcher.ts';
import { RayPlacementGroups, type RayPlacementGroupsOptions } from './ray-placement-groups.ts';

/** `command` and `env` are the engines' (as in `RayLauncherOptions`); the bridge's own are `bridgeCommand` and
 * `bridgeEnv`, so an engine command never replaces the bridge. */
export interface RayRuntimeOptions
  extends Omit<RayBridgeOptions, 'command' | 'env'>,
    RayPlacementGroupsOptions,
    Omit<RayLauncherOptions, 'bridge' | 'placementGroups'> {
  plan: PlacementPlan;
  /** Replaces `python3 uis_ray_bridge.py` (`RayBridgeOptions.command`). */
  bridgeCommand?: readonly string[];
  /** Environment of the bridge process (`RayBridgeOptions.env`). */
  bridgeEnv?: Record<string, string>;
}

/** What a manager needs to run on Ray: one bridge, the PG ownership implementation and the launcher, sharing the
 * validated probes. Pass `placementGroups` and `launcher` to every role's `InferenceManager`; `close()` after the
 * managers shut down (the bridge then also removes anything of ours a crash left behind). */
export interface RayRuntime {
  bridge: RayBridge;
  placementGroups: RayPlacementGroups;
  launcher: RayLauncher;
  close(): Promise<void>;
}

export async function startRayRuntime(opts: RayRuntimeOptions): Promise<RayRuntime> {
  const { command: _engineCommand, env: _engineEnv, bridgeCommand, bridgeEnv, ...bridgeOpts } = opts;
  const bridge = await RayBridge.start({
    ...bridgeOpts,
    ...(bridgeCommand ? { command: bridgeCommand } : {}),
    ...(bridgeEnv ? { env: bridgeEnv } : {}),
  });
  const placementGroups = new RayPlacementGroups(bridge, opts.plan, opts);
  const launcher = new RayLauncher({ ...opts, bridge, placementGroups });
  return { bridge, placementGroups, launcher, close: () => bridge.close() };
}
