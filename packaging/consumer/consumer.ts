// Type-checked against the packed `.d.ts` (not run): the types another repo sees when it imports the packages.
import type { ControlPlaneOptions, createControlPlane } from '@uis/control-plane';
import type { AdminApiOptions, InferenceGateway } from '@uis/gateway';
import type { InferenceManager, Launcher } from '@uis/manager';
import { type PlacementPlanner, planPlacement } from '@uis/planner';
import { ReplicaSelector, type ResolvedModel, resolveModel, type Selection } from '@uis/routing';
import { type GenerateResponse, SGLangClient } from '@uis/sglang-engine';
import { type SimServer, startSimServer } from '@uis/sglang-sim';
import { type DiscoverySnapshot, loadConfig, type PlanResult, type UisConfig, UisError } from '@uis/spec';

export function plan(text: string): PlanResult {
  const config: UisConfig = loadConfig(text, 'layout.yaml');
  return planPlacement(config);
}

export function pick(snapshot: DiscoverySnapshot, model: string): Selection | UisError {
  const resolved: ResolvedModel | UisError = resolveModel(snapshot, { model });
  return resolved instanceof UisError ? resolved : new ReplicaSelector().select(resolved);
}

export async function generate(url: string, text: string): Promise<string> {
  const client = new SGLangClient(url);
  const answer: GenerateResponse = await client.generate({ text });
  await client.close();
  return answer.text;
}

export async function sim(): Promise<SimServer> {
  return startSimServer({ port: 0 });
}

// @ts-expect-error: a plan result is not a config (the packed types are real types, not `any`).
export const notAConfig: UisConfig = plan('');

export type Classes = [
  typeof InferenceGateway,
  typeof InferenceManager,
  typeof PlacementPlanner,
  AdminApiOptions,
];
export type Launchers = Launcher['kind'];
export type Plane = [ControlPlaneOptions, ReturnType<typeof createControlPlane>];
