import type { MemoryTag } from '@uis/sglang-engine';
import type { DrainPolicy } from '@uis/spec';
import { UisError } from '@uis/spec';
import type { OffloadReport } from '../coordinator/types.ts';
import { errorMessage, settlesWithin } from '../runtime.ts';
import type { ManagerContext } from './context.ts';
import { type RecordedMemory, SETTLED_MEMORY } from './engine-records.ts';
import { ALL_TAGS, type ModelRuntime, type Slot } from './types.ts';

/** Onload and offload of GPU memory: what each model should be (`model.desire`), and per replica whether its
 * memory was reported released and which memory tags are resumed (`slot.memory`). */
export class Residency {
  constructor(private readonly ctx: ManagerContext) {}

  /** A fresh incarnation holds all its memory. */
  launched(s: Slot): void {
    s.memory.released = false;
    s.memory.resumed = new Set(ALL_TAGS);
  }

  /** The incarnation's processes were stopped: its GPU memory is free. */
  processesStopped(s: Slot): void {
    s.memory.released = true;
    this.ctx.records?.forget(s.engineId);
    this.ctx.adoption.settled(s.engineId);
  }

  /** Writes the engine's memory state durably: before a memory call (in doubt until it answers) and after. */
  private record(s: Slot, memory: RecordedMemory): void {
    this.ctx.records?.memory(s, memory);
    if (SETTLED_MEMORY.includes(memory)) this.ctx.adoption.settled(s.engineId);
  }

  offloadEnabled(s: Slot): boolean {
    return s.placement.offload || this.ctx.spec.deployment.offload;
  }

  /** Onloads the sleeping replicas of `models` and relaunches their replicas whose restart waited for this. */
  async activate(models: string[], tags?: MemoryTag[]): Promise<void> {
    const { replicas } = this.ctx;
    const want = tags && tags.length > 0 ? ALL_TAGS.filter((t) => tags.includes(t)) : [...ALL_TAGS];
    for (const name of models) replicas.model(name).desire = 'active';
    const all = models.flatMap((m) => replicas.slotsOf(m));
    const slots = all.filter((s) => s.state === 'sleeping' || s.state === 'onloading');
    for (const s of slots) if (s.state === 'sleeping') replicas.setState(s, 'onloading');
    this.ctx.publication.publish();
    const pending = this.ctx.recovery.pendingRestarts(all);
    const results = await Promise.allSettled([
      ...slots.map((s) => this.onload(s, want)),
      ...pending.map((s) => this.ctx.recovery.restartNow(s)),
    ]);
    const failed = results.flatMap((r, i) =>
      r.status === 'rejected' ? [`${[...slots, ...pending][i]?.engineId}: ${errorMessage(r.reason)}`] : [],
    );
    await this.ctx.routers.sync();
    this.ctx.publication.publish();
    if (failed.length > 0)
      throw new UisError({
        code: 'activate_failed',
        message: `onload failed: ${failed.join('; ')}`,
      });
  }

  /** Onloads the sleeping replicas among `slots` (whatever their model's desire), e.g. engines adopted in doubt in a
   * role no phase onloads. Throws `activate_failed` naming the replicas that failed. */
  async onloadSlots(slots: Slot[]): Promise<void> {
    const { replicas } = this.ctx;
    const asleep = slots.filter((s) => s.state === 'sleeping');
    for (const s of asleep) replicas.setState(s, 'onloading');
    this.ctx.publication.publish();
    const results = await Promise.allSettled(asleep.map((s) => this.onload(s, [...ALL_TAGS])));
    const failed = results.flatMap((r, i) =>
      r.status === 'rejected' ? [`${asleep[i]?.engineId}: ${errorMessage(r.reason)}`] : [],
    );
    await this.ctx.routers.sync();
    this.ctx.publication.publish();
    if (failed.length > 0)
      throw new UisError({ code: 'activate_failed', message: `onload failed: ${failed.join('; ')}` });
  }

  /** weights -> sync to target -> kv_cache, cuda_graph -> ready. */
  private async onload(s: Slot, want: MemoryTag[]): Promise<void> {
    const { replicas, weights } = this.ctx;
    const engine = replicas.engineOf(s);
    const m = replicas.model(s.model);
    const { resumed } = s.memory;
    this.record(s, 'resuming');
    try {
      // With nothing to sync (static model, or already at the target) there is no second copy of the weights to
      // make room for: everything resumes in one call. Otherwise weights first, sync, then the KV cache.
      if (want.length === ALL_TAGS.length && resumed.size === 0 && !weights.needsSync(s, m)) {
        await engine.wake();
        for (const t of ALL_TAGS) resumed.add(t);
        s.memory.released = false;
      }
      if (want.includes('weights') && !resumed.has('weights')) {
        await engine.wake(['weights']);
        resumed.add('weights');
        s.memory.released = false;
      }
      if (resumed.has('weights')) await weights.sync(s, m);
      const rest = want.filter((t) => t !== 'weights' && !resumed.has(t));
      if (rest.length > 0) {
        await engine.wake(rest);
        for (const t of rest) resumed.add(t);
      }
      if (ALL_TAGS.every((t) => resumed.has(t))) {
        this.record(s, 'resident');
        replicas.setState(s, 'ready');
      }
    } catch (e) {
      this.ctx.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'onload failed');
      throw e;
    }
  }

  /** A replica that came up (scale-up, recovery) is ready, and goes straight back to sleep when its model sleeps. */
  async readyOrAsleep(s: Slot, m: ModelRuntime): Promise<void> {
    this.ctx.replicas.setState(s, 'ready');
    if (m.desire === 'sleeping') {
      this.ctx.replicas.setState(s, 'draining');
      await this.offload(s, 0, 'abort');
    }
  }

  /** Publishes `models` draining, waits for their in-flight work, releases their memory; the report is the proof
   * the coordinator needs. */
  async drain(models: string[], opts: { deadlineMs?: number; policy?: DrainPolicy }): Promise<OffloadReport> {
    const { replicas } = this.ctx;
    for (const name of models) replicas.model(name).desire = 'sleeping';
    const slots = models.flatMap((m) => replicas.slotsOf(m));
    const draining = slots.filter((s) => s.state === 'ready' || s.state === 'onloading');
    for (const s of draining) replicas.setState(s, 'draining');
    // Draining is visible (direct_eligible false, router entry removed) before any work is waited for.
    await this.ctx.routers.sync();
    this.ctx.publication.publish();
    const deadlineMs = opts.deadlineMs ?? this.ctx.opts.drainDeadlineMs;
    const policy = opts.policy ?? this.ctx.opts.drainPolicy;
    const recovering = this.ctx.recovery.running(slots);
    // Adopted while a memory call was in flight: asleep, its memory in doubt. Released again for the proof.
    const doubtful = slots.filter(
      (s) => s.state === 'sleeping' && !s.memory.released && this.offloadEnabled(s),
    );
    await Promise.allSettled([
      ...draining.map((s) => this.offload(s, deadlineMs, policy)),
      ...doubtful.map((s) => this.release(s)),
      // A recovery that is launching sees the model's new desire and puts its replica to sleep (or defers the
      // restart); the report waits for it within the drain deadline instead of reporting a half-started replica.
      ...(recovering.length > 0
        ? [settlesWithin(this.ctx.clock, Promise.allSettled(recovering), Math.max(deadlineMs, 1_000))]
        : []),
    ]);
    this.ctx.publication.publish();
    const engines = slots.map((s) => ({
      engine_id: s.engineId,
      memory_released: s.memory.released,
      state: s.state,
    }));
    return { memoryReleased: engines.every((e) => e.memory_released), engines };
  }

  private async release(s: Slot): Promise<void> {
    this.record(s, 'releasing');
    try {
      await this.ctx.replicas.engineOf(s).releaseMemory();
      s.memory.released = true;
      s.memory.resumed.clear();
      this.record(s, 'released');
    } catch (e) {
      this.ctx.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'release failed');
      await this.ctx.recovery.markDead(s, `release failed: ${errorMessage(e)}`, true);
    }
  }

  private async offload(s: Slot, deadlineMs: number, policy: DrainPolicy): Promise<void> {
    const { replicas, clock } = this.ctx;
    const engine = replicas.engineOf(s);
    const t0 = clock.now();
    this.record(s, 'releasing');
    try {
      const report = await engine.drain({
        deadlineMs,
        policy,
        inFlight: () => this.ctx.inFlight.count(s.engineId),
      });
      if (this.offloadEnabled(s)) {
        // drain() already flushed the cache (except in_place); a second flush would only cost a round trip.
        if (report.flushed) await engine.releaseMemory();
        else await engine.sleep();
        s.memory.released = true;
        s.memory.resumed.clear();
      }
      this.record(s, s.memory.released ? 'released' : 'resident');
      if (s.state === 'draining') replicas.setState(s, 'sleeping');
      this.ctx.audit(
        'replica.offloaded',
        s.engineId,
        { ...report, memory_released: s.memory.released },
        clock.now() - t0,
      );
    } catch (e) {
      this.ctx.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'drain/offload failed');
      this.ctx.audit('replica.offload_failed', s.engineId, { error: errorMessage(e) }, clock.now() - t0);
      // `draining` has no way back but `sleeping` or `dead`: an engine that cannot release its memory is
      // declared dead (and, when launched here, stopped, which frees the memory); recovery follows its model.
      await this.ctx.recovery.markDead(s, `offload failed: ${errorMessage(e)}`, true);
    }
  }
}
