import { identifyProcess, type SGLangEngine, stopRecordedProcesses } from '@uis/sglang-engine';
import type { Clock, Logger } from '@uis/spec';
import type { Launcher } from '../launchers.ts';
import { errorMessage } from '../runtime.ts';
import type { Db } from '../store.ts';
import { type EngineRecord, EngineRecords, SETTLED_MEMORY } from './engine-records.ts';
import type { Incarnations } from './incarnations.ts';
import type { MemoryLedger } from './memory-ledger.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { Audit, Slot } from './types.ts';

/** Deadline of each probe call to a recorded engine. */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * What a start does with the engines a previous control plane recorded (the `engines` table). With adoption on,
 * a recorded engine of a planned replica that still runs, answers over HTTP and is the one recorded (its pids
 * started when recorded, same model path, same port) is adopted instead of launched; every other record is
 * stopped, but only processes verified to be the recorded engine are ever signalled. Without adoption every
 * record is stopped (their watchdogs normally did it already), and so is a recorded engine whose memory call was in
 * flight (its slot is launched again, fully resident). Processes that run but cannot be verified as the recorded
 * engine go to the memory ledger's doubts.
 */
export class Adoption {
  constructor(
    private readonly role: string,
    private readonly launcher: Launcher,
    /** Adoption mode: recorded engines that still run and match are adopted (else every record is stopped). */
    private readonly enabled: boolean,
    private readonly records: EngineRecords | null,
    private readonly replicas: ReplicaTable,
    private readonly incarnations: Incarnations,
    private readonly memory: MemoryLedger,
    private readonly logger: Logger,
    private readonly audit: Audit,
  ) {}

  /** Adopts what it can of `slots` (fresh slots of the plan, still `starting`) and stops every other record.
   * Returns the adopted slots: the caller launches the rest. */
  async run(slots: Slot[]): Promise<Set<Slot>> {
    const adopted = new Set<Slot>();
    if (!this.records) return adopted;
    const bySlot = new Map(slots.map((s) => [s.engineId, s]));
    await Promise.all(
      this.records.list().map(async (rec) => {
        const s = bySlot.get(rec.engine_id);
        let why = 'adoption is off';
        if (this.enabled && s) {
          const probed = await this.probe(s, rec);
          if (typeof probed !== 'string') {
            this.adopt(s, rec, probed);
            adopted.add(s);
            return;
          }
          why = probed;
        } else if (this.enabled) why = 'the plan has no such replica any more';
        await this.stop(rec, why);
      }),
    );
    return adopted;
  }

  /** The engine of the record when it is the one recorded and its memory is known, else why not. */
  private async probe(s: Slot, rec: EngineRecord): Promise<SGLangEngine | string> {
    const adopt = this.launcher.adopt;
    if (!adopt) return `launcher ${this.launcher.kind} cannot adopt engines`;
    // A release or resume that never answered leaves its memory unknown, and SGLang cannot be asked: no route of any
    // supported release reports it (get_server_info's memory_usage holds the sizes loaded at start), and a second
    // release or resume of the same memory kills the engine (torch_memory_saver exits on pausing paused memory, the
    // scheduler's offload_tags.remove raises on resuming resident memory). Relaunched, it is fully resident: known.
    if (!SETTLED_MEMORY.includes(rec.memory))
      return `${rec.memory} when the previous control plane stopped: SGLang cannot report its memory, so it is relaunched to a known state`;
    if (rec.model !== s.model || rec.model_path !== s.spec.model_path)
      return `recorded for ${rec.model} (${rec.model_path}), the plan now runs ${s.model} (${s.spec.model_path})`;
    for (const p of rec.processes) {
      const id = identifyProcess(p);
      if (id !== 'same')
        return id === 'gone' ? `process ${p.pid} is gone` : `process ${p.pid} cannot be verified`;
    }
    const engine = adopt.call(this.launcher, this.incarnations.launchRequest(s), rec);
    const call = { timeoutMs: PROBE_TIMEOUT_MS };
    let identified = false;
    try {
      if (!(await engine.client.health(call))) return `${rec.base_url}/health answers 5xx`;
      const info = await engine.client.modelInfo(call);
      if (info.model_path !== s.spec.model_path)
        return `${rec.base_url} serves ${info.model_path}, not ${s.spec.model_path}`;
      const server = await engine.client.serverInfo(call);
      const port = Number(new URL(rec.base_url).port);
      if (server.port !== undefined && server.port !== port)
        return `${rec.base_url} reports port ${server.port}`;
      // As a launched engine's start does: discovery and the console show it, and what it cannot do is refused.
      engine.release.learn(server.version);
      s.weightVersion = await engine.client.weightVersion(call);
      identified = true;
      return engine;
    } catch (e) {
      return `${rec.base_url} does not answer: ${errorMessage(e)}`;
    } finally {
      if (!identified) await engine.client.close().catch(() => undefined);
    }
  }

  /** Takes the engine over in the state its record says (resident, or released and asleep). */
  private adopt(s: Slot, rec: EngineRecord, engine: SGLangEngine): void {
    const { replicas, audit, logger } = this;
    this.incarnations.attach(s, engine);
    s.generation = rec.generation;
    s.memory.released = rec.memory === 'released';
    // A drain by the memory plan keeps some tags: resuming one it still holds would kill the engine.
    s.memory.resumed = new Set(rec.resident_tags);
    replicas.setState(s, 'ready');
    if (rec.memory !== 'resident') {
      replicas.setState(s, 'draining');
      replicas.setState(s, 'sleeping');
    }
    this.records?.launched(s, rec.memory, rec.paused);
    logger.info(
      {
        role: this.role,
        engineId: s.engineId,
        url: rec.base_url,
        memory: rec.memory,
        sglangVersion: engine.sglangVersion,
      },
      'engine adopted',
    );
    audit('replica.adopted', s.engineId, {
      url: rec.base_url,
      pids: engine.pids(),
      memory: rec.memory,
      weight_version: s.weightVersion,
      sglang_version: engine.sglangVersion ?? null,
    });
  }

  /** Stops a record's processes that are verifiably its engine and forgets the record; processes that run but
   * cannot be verified are left alone and named in the memory ledger's doubts. */
  private async stop(rec: EngineRecord, why: string): Promise<void> {
    const left = await stopRecordedProcesses(rec.processes, 5_000);
    const pids = rec.processes.map((p) => p.pid);
    if (left.length > 0) {
      const reason = `pid ${left.map((p) => p.pid).join(', ')} still runs and cannot be verified as the engine at ${rec.base_url}`;
      this.memory.doubt(rec.engine_id, reason);
      this.logger.error({ role: this.role, engineId: rec.engine_id, why }, `${reason}; stop it by hand`);
      this.audit('replica.unverified', rec.engine_id, { url: rec.base_url, pids, why });
      return;
    }
    this.records?.forget(rec.engine_id);
    this.logger.warn({ role: this.role, engineId: rec.engine_id, why }, 'recorded engine not adopted');
    this.audit('replica.not_adopted', rec.engine_id, { url: rec.base_url, pids, why });
  }
}

/** Engines recorded for roles the config no longer has: no manager looks at them, so they are stopped here (verified
 * processes only) and forgotten. Resolves with the engines left running because they could not be verified. */
export async function stopEnginesOfRemovedRoles(
  db: Db,
  roles: readonly string[],
  clock: Clock,
  logger: Logger,
): Promise<string[]> {
  const left: string[] = [];
  for (const role of EngineRecords.roles(db).filter((r) => !roles.includes(r))) {
    const records = new EngineRecords(db, role, clock);
    for (const rec of records.list()) {
      const running = await stopRecordedProcesses(rec.processes, 5_000);
      if (running.length === 0) {
        records.forget(rec.engine_id);
        logger.warn(
          { role, engineId: rec.engine_id },
          'stopped a recorded engine of a role the config no longer has',
        );
      } else left.push(`${role} ${rec.engine_id} (pid ${running.map((p) => p.pid).join(', ')})`);
    }
  }
  return left;
}
