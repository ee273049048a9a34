import type { PlacementPlan } from '@uis/spec';
import { RayBridge, type RayBridgeOptions } from './ray-bridge.ts';
import { RayLauncher, type RayLauncherOptions } from './ray-launcher.ts';
import { RayPlacementGroups, type RayPlacementGroupsOptions } from './ray-placement-groups.ts';

export interface RayRuntimeOptions
  extends RayBridgeOptions,
    RayPlacementGroupsOptions,
    Omit<RayLauncherOptions, 'bridge' | 'placementGroups'> {
  plan: PlacementPlan;
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
  const bridge = await RayBridge.start(opts);
  const placementGroups = new RayPlacementGroups(bridge, opts.plan, opts);
  const launcher = new RayLauncher({ ...opts, bridge, placementGroups });
  return { bridge, placementGroups, launcher, close: () => bridge.close() };
}
