import {
  type ConfigRole,
  type DeploymentMode,
  type ErrorCode,
  type GroupPlacement,
  type PoolPlan,
  ROLE_CAPABILITIES,
  type Role,
  type UisConfig,
} from '@uis/spec';
import type { BundleSite, Inventory } from './inventory.ts';

// The shared pieces of the planner's stages (planner.ts runs them in order over one PlanCtx).

/** Fractional Ray GPU reservations each actor holds on a bundle (Relax's numbers). Offloading model memory does
 * not release them, so everything that ever sits on a bundle counts, whatever its phase. */
/** Ray GPU fractions per bundle: the trainer's, and each role's from the role capability table. */
export const RAY_GPU_FRACTION = {
  train: 0.4,
  rollout: ROLE_CAPABILITIES.rollout.rayGpuFraction,
  genrm: ROLE_CAPABILITIES.genrm.rayGpuFraction,
  /** GenRM sharing bundles with rollout. */
  genrm_with_rollout: ROLE_CAPABILITIES.genrm.rayGpuFractionBesideProducer,
  teacher: ROLE_CAPABILITIES.teacher.rayGpuFraction,
} as const;

export const ACTOR_POOL = 'actor';
export const EPS = 1e-9;

export interface PoolState {
  plan: PoolPlan;
  sites: Array<BundleSite | undefined>;
  /** Summed Ray reservations per bundle and who holds them. */
  reserved: Float64Array;
  /** Claims over bundle ranges [from, to); read back only to explain a violation. */
  claims: Array<{ from: number; to: number; who: string; fraction: number; path: string }>;
}

export interface PlannedGroup {
  role: Role;
  path: string;
  start: number;
  stop: number;
  pool: string;
  phase: string | null;
  unscheduled: boolean;
  placement: GroupPlacement | undefined;
}

export const isColocated = (mode: DeploymentMode) => mode === 'colocated_split' || mode === 'colocated_defer';

export type Fail = (code: ErrorCode, path: string, message: string) => void;

export const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);
export const round = (x: number) => Math.round(x * 1000) / 1000;

/** Where each scheduled role is resident. */
export type Residency = Map<string, { group: string; phase: string; index: number; path: string }>;

/** What every stage reads: the config, its inventory, the roles to place, and where violations go. */
export interface PlanCtx {
  config: UisConfig;
  inv: Inventory;
  roles: Array<{ role: Role; spec: ConfigRole }>;
  fail: Fail;
}
