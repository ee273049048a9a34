import { capabilities, silentLogger, systemClock, UisError } from '@uis/spec';
import { InFlightTracker } from '../in-flight.ts';
import type { Registry } from '../registry.ts';
import { Adoption } from './adoption.ts';
import { ElasticScaler } from './elastic-scaler.ts';
import { EnginePool } from './engine-pool.ts';
import { EngineRecords } from './engine-records.ts';
import { ExternalEngines } from './external-engines.ts';
import { Health } from './health.ts';
import { Incarnations } from './incarnations.ts';
import { type InferenceManagerInit, resolveOptions } from './init.ts';
import { MemoryLedger } from './memory-ledger.ts';
import { Onload } from './onload.ts';
import { OperationQueue } from './operation-queue.ts';
import { PublicationProjector } from './publication.ts';
import { Recovery } from './recovery.ts';
import { ReplicaTable } from './replica-table.ts';
import { Residency } from './residency.ts';
import { RouterSync } from './router-sync.ts';
import type { Audit, ModelRuntime } from './types.ts';
import { WeightSwitch } from './weight-switch.ts';
import { WeightSync } from './weight-sync.ts';

/** The parts of one role's manager that its façade (`InferenceManager`) calls. */
export interface ManagerParts {
  inFlight: InFlightTracker;
  replicas: ReplicaTable;
  queue: OperationQueue;
  publication: PublicationProjector;
  memory: MemoryLedger;
  weights: WeightSync;
  switches: WeightSwitch;
  health: Health;
  residency: Residency;
  recovery: Recovery;
  onload: Onload;
  pool: EnginePool;
  scaler: ElasticScaler;
  /** The drain deadline a scale-in uses when its request names none. */
  drainDeadlineMs: number;
  externals: ExternalEngines;
}

/** Checks the role's models against what the manager was given; the models' runtime state. */
function modelsOf(init: InferenceManagerInit): Map<string, ModelRuntime> {
  const models = new Map<string, ModelRuntime>();
  for (const m of init.role.models) {
    if (m.register_dcs && m.weight_source === 'static')
      throw new UisError({
        code: 'static_model_dcs',
        path: `models.${m.name}.register_dcs`,
        message: `model ${m.name} has weight_source static: it cannot register for DCS; drop register_dcs`,
      });
    models.set(m.name, {
      spec: m,
      target: null,
      replay: null,
      desire: 'active',
      held: false,
      dcsRegistered: m.register_dcs,
    });
    if (capabilities(m).needs_router && !init.routers?.[m.name])
      throw new UisError({
        code: 'router_missing',
        path: `models.${m.name}.route_mode`,
        message: `model ${m.name} uses sglang_router: pass a router client (routers.${m.name})`,
      });
  }
  for (const p of init.placements)
    if (p.role === init.role.role && !models.has(p.model))
      throw new UisError({
        code: 'unknown_model',
        path: `placements.${p.model}`,
        message: `placement names model ${p.model}, which role ${init.role.role} does not define`,
      });
  return models;
}

/** The bottom of a role's manager: its replica table and the parts that keep engines and their state (everything
 * but the operations on models). */
function assembleEngines(init: InferenceManagerInit, registry: Registry, audit: Audit) {
  const role = init.role.role;
  const clock = init.clock ?? systemClock;
  const logger = init.logger ?? silentLogger;
  const opts = resolveOptions(init.options);
  const models = modelsOf(init);
  const replicas = new ReplicaTable(role, audit, logger);
  for (const [name, m] of models) replicas.models.set(name, m);
  // A drain-mode weight switch closes its model's admission; the switch is built below, once the tracker exists.
  let switches: WeightSwitch | undefined;
  const inFlight = new InFlightTracker((id) => {
    const s = replicas.find(id);
    return s !== undefined && replicas.eligible(s) && switches?.admits(s.model) !== false;
  });
  const queue = new OperationQueue(role, clock, audit);
  const routers = new RouterSync(replicas, init.routers ?? {}, audit);
  const publication = new PublicationProjector(role, replicas, registry, opts.routerUrls);
  // Only engines that can outlive this process are worth a record (in-process and Ray engines die with it).
  const records = init.store && init.launcher.adopt ? new EngineRecords(init.store, role, clock) : null;
  const memory = new MemoryLedger(records, init.role.deployment.offload);
  const weights = new WeightSync(replicas, records, routers, publication, clock, audit);
  switches = new WeightSwitch(
    replicas,
    records,
    routers,
    publication,
    registry,
    inFlight,
    opts.drainDeadlineMs,
    clock,
    audit,
  );
  const { launcher } = init;
  const incarnations = new Incarnations(role, launcher, weights, memory, records, opts, logger);
  const health = new Health(
    role,
    replicas,
    queue,
    routers,
    publication,
    memory,
    incarnations,
    launcher.ownsProcesses,
    opts,
    clock,
    logger,
    audit,
  );
  return {
    ...{ role, clock, logger, opts, replicas, inFlight, queue, routers, publication, records, memory },
    ...{ weights, switches, incarnations, health },
  };
}

/** Builds a role's manager bottom-up, each part given what it uses in its constructor: a part reaches only parts
 * built before it. The two ways up are events a part subscribes to: the health part hears of process exits from
 * the incarnations, and recovery hears of deaths from the health part. */
export function assembleParts(init: InferenceManagerInit, registry: Registry, audit: Audit): ManagerParts {
  const engines = assembleEngines(init, registry, audit);
  const { role, clock, logger, opts, replicas, inFlight, queue, routers, publication, records } = engines;
  const { memory, weights, switches, incarnations, health } = engines;
  const { launcher } = init;
  const residency = new Residency(
    replicas,
    memory,
    health,
    routers,
    publication,
    inFlight,
    opts,
    clock,
    logger,
    audit,
  );
  const recovery = new Recovery(
    replicas,
    queue,
    health,
    incarnations,
    memory,
    weights,
    residency,
    routers,
    publication,
    opts,
    clock,
    logger,
    audit,
  );
  const adoption = new Adoption(
    role,
    launcher,
    init.adoptEngines === true,
    records,
    replicas,
    incarnations,
    memory,
    logger,
    audit,
  );
  const placements = init.placements.filter((p) => p.role === role);
  const pools = init.pools ?? {};
  const pool = new EnginePool(
    role,
    placements,
    pools,
    init.placementGroups,
    replicas,
    adoption,
    incarnations,
    weights,
    health,
    routers,
    publication,
    records,
    clock,
    logger,
    audit,
  );
  const externals = new ExternalEngines(
    role,
    placements,
    replicas,
    incarnations,
    weights,
    routers,
    publication,
    audit,
  );
  const scaler = new ElasticScaler(
    placements,
    pools,
    replicas,
    incarnations,
    externals,
    weights,
    residency,
    routers,
    publication,
    inFlight,
    opts,
    logger,
    audit,
  );
  const onload = new Onload(replicas, memory, weights, recovery, routers, publication, logger);
  return {
    ...{
      inFlight,
      replicas,
      queue,
      publication,
      memory,
      weights,
      switches,
      health,
      residency,
      recovery,
      onload,
    },
    ...{ pool, scaler, externals, drainDeadlineMs: opts.drainDeadlineMs },
  };
}
