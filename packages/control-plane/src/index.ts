export {
  type AutoscalePolicy,
  Autoscaler,
  autoscalePolicies,
  decideScale,
  type EngineSample,
  histogramQuantile,
  parseEngineMetrics,
  type ScaleDecision,
} from './autoscaler.ts';
export { BarrierBoard, type BarrierWait } from './barrier-board.ts';
export * from './commands/index.ts';
export { ControlPlane } from './control-plane.ts';
export {
  type ControlPlaneOptions,
  createControlPlane,
  planOf,
} from './create-control-plane.ts';
export { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';
export type { StartedRay } from './launchers/ray.ts';
export { type ModelLoad, modelLoads } from './model-load.ts';
export {
  type ModelReplica,
  ModelReplicaSchema,
  type ModelReplicas,
  ModelReplicasSchema,
  modelReplicas,
} from './model-replicas.ts';
export { OperatorIntents, type Speaker } from './operator-intents.ts';
export {
  ScaleInInputSchema,
  ScaleOutInputSchema,
  scaleModel,
} from './scale-inputs.ts';
export { type ScaleFilter, ScaleOperations } from './scale-operations.ts';
export {
  type ControlPlaneEvent,
  type ControlPlaneListener,
  ControlPlaneStream,
} from './stream.ts';
export { submitBatch } from './submit-batch.ts';
export { type AppRouter, type AppRouterDeps, buildAppRouter, type TrpcContext } from './trpc/app-router.ts';
export { ChangeFeed, pause } from './trpc/change-feed.ts';
