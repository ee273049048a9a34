import type { InferenceRoleSpec } from '@uis/spec';
import type { InFlightTracker } from '../in-flight.ts';
import type { Clock, Logger } from '../runtime.ts';
import type { Adoption } from './adoption.ts';
import type { ElasticScaler } from './elastic-scaler.ts';
import type { EnginePool } from './engine-pool.ts';
import type { EngineRecords } from './engine-records.ts';
import type { ExternalEngines } from './external-engines.ts';
import type { OperationQueue } from './operation-queue.ts';
import type { PublicationProjector } from './publication.ts';
import type { Recovery } from './recovery.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { Residency } from './residency.ts';
import type { RouterSync } from './router-sync.ts';
import type { ResolvedManagerOptions } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** Writes one audit event of the manager (its actor is the role). */
export type Audit = (
  kind: string,
  subject: string,
  data: Record<string, unknown>,
  durationMs?: number,
) => void;

/** The parts of one role's manager and what they share. Each part owns its own state (see `Slot`) and reaches
 * the others through this object; `InferenceManager` builds it and is the only public face. */
export interface ManagerContext {
  readonly role: string;
  readonly spec: InferenceRoleSpec;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly opts: ResolvedManagerOptions;
  readonly inFlight: InFlightTracker;
  readonly audit: Audit;
  /** Replicas and models, the state guard, eligibility. */
  readonly replicas: ReplicaTable;
  /** Lifecycle operations one at a time; the manager's shut-down flag. */
  readonly queue: OperationQueue;
  /** Router entries follow eligibility. */
  readonly routers: RouterSync;
  /** The role's discovery snapshot and the manager snapshot. */
  readonly publication: PublicationProjector;
  /** Target versions, replayable updates, syncing replicas to the target. */
  readonly weights: WeightSync;
  /** Onload and offload: memory released and resumed, the model's desire. */
  readonly residency: Residency;
  /** Health checks, death, restarts with backoff. */
  readonly recovery: Recovery;
  /** Placement groups, launching incarnations, start with rollback, shutdown. */
  readonly pool: EnginePool;
  /** Elastic scale on reserved bundles; retiring replicas. */
  readonly scaler: ElasticScaler;
  /** Engines attached by URL. */
  readonly externals: ExternalEngines;
  /** The durable record of the engines this role launched (null without a store or for launchers whose engines
   * never outlive the control plane). */
  readonly records: EngineRecords | null;
  /** A start's adoption of recorded engines; engines whose memory is in doubt after a restart. */
  readonly adoption: Adoption;
}
