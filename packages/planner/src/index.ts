export { checkEngineSites, type EngineChunk, type EngineSitesResult } from './engine-sites.ts';
export { type BundleSite, Inventory } from './inventory.ts';
export { PlacementPlanner, planPlacement, planTotalGpus, RAY_GPU_FRACTION } from './planner.ts';
export { type BundleProbeEntry, BundleProbeEntrySchema, validateBundleProbe } from './probe.ts';
export { fromRelaxArgs, RELAX_FLAGS, type RelaxArgsOptions, tokenize } from './relax/index.ts';
export {
  placeReservedReplicas,
  type ReservedReplicasInput,
  type ReservedReplicasResult,
} from './reserved-replicas.ts';
