// What a role's manager is built from: the plan, the launcher, the stores; and its tunables with their defaults.
import type { Clock, DrainPolicy, GroupPlacement, InferenceRoleSpec, Logger, PoolPlan } from '@uis/spec';
import type { EventLog } from '../event-log.ts';
import type { Launcher } from '../launchers.ts';
import type { PlacementGroups } from '../placement-groups.ts';
import type { Registry } from '../registry.ts';
import type { Db } from '../store.ts';
import type { RouterRegistrar } from './types.ts';

export interface ManagerOptions {
  /** Deadline of one engine start (launch + healthy). Default 10 min. */
  startDeadlineMs?: number;
  /** Period of health checks. Default 5 s. */
  healthIntervalMs?: number;
  /** Deadline of one health check. Default 5 s. */
  healthTimeoutMs?: number;
  /** Consecutive failed checks before a replica is declared dead. Default 3. */
  failuresToDead?: number;
  /** Restart backoff (doubles per failed attempt up to the max). Defaults 1 s / 60 s. */
  restartBackoffMs?: number;
  restartBackoffMaxMs?: number;
  /** Drain: how long to wait for in-flight work, and what to do with the rest. Defaults 120 s / wait. */
  drainDeadlineMs?: number;
  drainPolicy?: DrainPolicy;
  /** Router URL per model for `route_mode: sglang_router` (the router process is started elsewhere). */
  routerUrls?: Record<string, string>;
}

export type ResolvedManagerOptions = Required<Omit<ManagerOptions, 'routerUrls'>> & {
  routerUrls: Record<string, string>;
};

export interface InferenceManagerInit {
  role: InferenceRoleSpec;
  /** This role's groups from the placement plan (other roles' entries are ignored). */
  placements: GroupPlacement[];
  /** The plan's pools: the manager creates/deletes the PGs it owns (`owner: manager`) and no others. */
  pools?: Record<string, PoolPlan>;
  launcher: Launcher;
  registry?: Registry;
  placementGroups?: PlacementGroups;
  /** Router client per model (router mode). */
  routers?: Record<string, RouterRegistrar>;
  events?: EventLog;
  /** The manager's database: when `events` is not given, the audit log is kept here. The engines the launcher
   * starts are recorded here too (when it can adopt engines), so that a restart finds them. */
  store?: Db;
  /** Adoption mode: a start adopts the recorded engines that still run and match instead of launching new ones
   * (the launcher must keep its engines across restarts, e.g. `LocalLauncher({ keepEngines: true })`). */
  adoptEngines?: boolean;
  clock?: Clock;
  logger?: Logger;
  options?: ManagerOptions;
}

export function resolveOptions(o: ManagerOptions = {}): ResolvedManagerOptions {
  return {
    startDeadlineMs: o.startDeadlineMs ?? 600_000,
    healthIntervalMs: o.healthIntervalMs ?? 5_000,
    healthTimeoutMs: o.healthTimeoutMs ?? 5_000,
    failuresToDead: o.failuresToDead ?? 3,
    restartBackoffMs: o.restartBackoffMs ?? 1_000,
    restartBackoffMaxMs: o.restartBackoffMaxMs ?? 60_000,
    drainDeadlineMs: o.drainDeadlineMs ?? 120_000,
    drainPolicy: o.drainPolicy ?? 'wait',
    routerUrls: o.routerUrls ?? {},
  };
}
