import type { MemoryTag } from '@uis/sglang-engine';
import { type Clock, type DrainPolicy, type Logger, settlesWithin } from '@uis/spec';
import type { KeepTags, OffloadReport } from '../coordinator/types.ts';
import type { InFlightTracker } from '../in-flight.ts';
import { errorMessage } from '../runtime.ts';
import type { Health } from './health.ts';
import type { ResolvedManagerOptions } from './init.ts';
import type { MemoryLedger } from './memory-ledger.ts';
import type { PublicationProjector } from './publication.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { RouterSync } from './router-sync.ts';
import { ALL_TAGS, type Audit, type ModelRuntime, type Slot } from './types.ts';

/** Offload of GPU memory: models drained to sleep (`model.desire` sleeping), each replica's in-flight work waited
 * for and its memory released (`slot.memory`); a replica that comes up while its model sleeps goes back to sleep.
 * `Onload` is the way back. */
export class Residency {
  constructor(
    private readonly replicas: ReplicaTable,
    private readonly memory: MemoryLedger,
    private readonly health: Health,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly inFlight: InFlightTracker,
    private readonly opts: Pick<ResolvedManagerOptions, 'drainDeadlineMs' | 'drainPolicy'>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly audit: Audit,
  ) {}

  /** A replica that came up (scale-up, recovery) is ready, and goes straight back to sleep when its model sleeps. */
  async readyOrAsleep(s: Slot, m: ModelRuntime): Promise<void> {
    this.replicas.setState(s, 'ready');
    if (m.desire === 'sleeping') {
      this.replicas.setState(s, 'draining');
      await this.offload(s, 0, 'abort', []);
    }
  }

  /** Publishes `models` draining, waits for their in-flight work, releases their memory; the report is the proof
   * the coordinator needs. */
  async drain(
    models: string[],
    opts: { deadlineMs?: number; policy?: DrainPolicy; keep?: KeepTags },
  ): Promise<OffloadReport> {
    const { replicas } = this;
    const slots = models.flatMap((m) => replicas.slotsOf(m));
    const policy = opts.policy ?? this.opts.drainPolicy;
    // Refused before any replica drains: an engine whose SGLang release cannot pause this way would fail mid-way.
    for (const s of slots) s.engine?.checkDrain(policy);
    for (const name of models) replicas.model(name).desire = 'sleeping';
    const draining = slots.filter((s) => s.state === 'ready' || s.state === 'onloading');
    for (const s of draining) replicas.setState(s, 'draining');
    // Draining is visible (direct_eligible false, router entry removed) before any work is waited for.
    await this.routers.sync();
    this.publication.publish();
    const deadlineMs = opts.deadlineMs ?? this.opts.drainDeadlineMs;
    const recovering = slots.flatMap((s) => (s.health.recovery ? [s.health.recovery] : []));
    const keep = opts.keep ?? {};
    // Asleep with tags the plan no longer lets stay (kept through the last phase, not through the next one).
    const holding = slots.filter(
      (s) =>
        s.state === 'sleeping' &&
        s.memory.released &&
        this.memory.offloadEnabled(s) &&
        toRelease(s, keep).length > 0,
    );
    await Promise.allSettled([
      ...draining.map((s) => this.offload(s, deadlineMs, policy, keep[s.model] ?? [])),
      ...holding.map((s) => this.release(s, toRelease(s, keep))),
      // A recovery that is launching sees the model's new desire and puts its replica to sleep (or defers the
      // restart); the report waits for it within the drain deadline instead of reporting a half-started replica.
      ...(recovering.length > 0
        ? [settlesWithin(this.clock, Promise.allSettled(recovering), Math.max(deadlineMs, 1_000))]
        : []),
    ]);
    this.publication.publish();
    const engines = slots.map((s) => ({
      engine_id: s.engineId,
      memory_released: s.memory.released,
      state: s.state,
      // Named when the drain kept some tags on purpose (the memory plan's drains): the proof per tag.
      ...(opts.keep === undefined ? {} : { released_tags: ALL_TAGS.filter((t) => !s.memory.resumed.has(t)) }),
    }));
    return { memoryReleased: engines.every((e) => e.memory_released), engines };
  }

  /** Releases every tag, or only `tags` (the others stay on the GPUs). */
  private async release(s: Slot, tags?: MemoryTag[]): Promise<void> {
    this.memory.record(s, 'releasing');
    try {
      await this.replicas.engineOf(s).releaseMemory(tags);
      s.memory.released = true;
      if (tags === undefined) s.memory.resumed.clear();
      else for (const t of tags) s.memory.resumed.delete(t);
      this.memory.record(s, 'released');
    } catch (e) {
      this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'release failed');
      await this.health.markDead(s, `release failed: ${errorMessage(e)}`, true);
    }
  }

  /** Drains the replica and releases its memory but the tags in `keep`. */
  private async offload(
    s: Slot,
    deadlineMs: number,
    policy: DrainPolicy,
    keep: readonly MemoryTag[],
  ): Promise<void> {
    const { replicas, clock } = this;
    const engine = replicas.engineOf(s);
    const t0 = clock.now();
    this.memory.record(s, 'releasing');
    try {
      const report = await engine.drain({
        deadlineMs,
        policy,
        inFlight: () => this.inFlight.count(s.engineId),
      });
      if (this.memory.offloadEnabled(s)) {
        // Only tags it holds (an onload that stopped half-way left the rest released, and SGLang kills an engine
        // asked to release memory that is already released), and of those only what the plan does not keep.
        const tags = toRelease(s, { [s.model]: keep });
        const named = tags.length === ALL_TAGS.length ? undefined : tags;
        // drain() already flushed the cache (except in_place); a second flush would only cost a round trip.
        if (tags.length > 0) {
          if (report.flushed) await engine.releaseMemory(named);
          else await engine.sleep(named);
        }
        s.memory.released = true;
        for (const t of tags) s.memory.resumed.delete(t);
      }
      this.memory.record(s, s.memory.released ? 'released' : 'resident');
      if (s.state === 'draining') replicas.setState(s, 'sleeping');
      this.audit(
        'replica.offloaded',
        s.engineId,
        { ...report, memory_released: s.memory.released },
        clock.now() - t0,
      );
    } catch (e) {
      this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'drain/offload failed');
      this.audit('replica.offload_failed', s.engineId, { error: errorMessage(e) }, clock.now() - t0);
      // `draining` has no way back but `sleeping` or `dead`: an engine that cannot release its memory is
      // declared dead (and, when launched here, stopped, which frees the memory); recovery follows its model.
      await this.health.markDead(s, `offload failed: ${errorMessage(e)}`, true);
    }
  }
}

/** The tags the replica still holds that the plan does not keep through the next phase. */
function toRelease(s: Slot, keep: KeepTags): MemoryTag[] {
  const kept = keep[s.model] ?? [];
  return ALL_TAGS.filter((t) => s.memory.resumed.has(t) && !kept.includes(t));
}
