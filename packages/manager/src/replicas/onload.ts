import type { MemoryTag } from '@uis/sglang-engine';
import { type Logger, UisError } from '@uis/spec';
import { errorMessage } from '../runtime.ts';
import type { MemoryLedger } from './memory-ledger.ts';
import type { PublicationProjector } from './publication.ts';
import type { Recovery } from './recovery.ts';
import type { ReplicaTable } from './replica-table.ts';
import type { RouterSync } from './router-sync.ts';
import { ALL_TAGS, type Slot } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** Onload of GPU memory: models activated (`model.desire` active), each sleeping replica's memory resumed (weights
 * first, synced to the target version, then the KV cache), and the restarts deferred to this onload run. The way
 * back from `Residency`'s drain. */
export class Onload {
  constructor(
    private readonly replicas: ReplicaTable,
    private readonly memory: MemoryLedger,
    private readonly weights: WeightSync,
    private readonly recovery: Recovery,
    private readonly routers: RouterSync,
    private readonly publication: PublicationProjector,
    private readonly logger: Logger,
  ) {}

  /** Onloads the sleeping replicas of `models` and relaunches their replicas whose restart waited for this. */
  async activate(models: string[], tags?: MemoryTag[]): Promise<void> {
    const { replicas } = this;
    const want = tags && tags.length > 0 ? ALL_TAGS.filter((t) => tags.includes(t)) : [...ALL_TAGS];
    for (const name of models) replicas.model(name).desire = 'active';
    const all = models.flatMap((m) => replicas.slotsOf(m));
    const slots = all.filter((s) => s.state === 'sleeping' || s.state === 'onloading');
    for (const s of slots) if (s.state === 'sleeping') replicas.setState(s, 'onloading');
    this.publication.publish();
    const pending = this.recovery.pendingRestarts(all);
    const results = await Promise.allSettled([
      ...slots.map((s) => this.onload(s, want)),
      ...pending.map((s) => this.recovery.restartNow(s)),
    ]);
    const failed = results.flatMap((r, i) =>
      r.status === 'rejected' ? [`${[...slots, ...pending][i]?.engineId}: ${errorMessage(r.reason)}`] : [],
    );
    await this.routers.sync();
    this.publication.publish();
    if (failed.length > 0)
      throw new UisError({
        code: 'activate_failed',
        message: `onload failed: ${failed.join('; ')}`,
      });
  }

  /** weights -> sync to target -> kv_cache, cuda_graph -> ready. */
  private async onload(s: Slot, want: MemoryTag[]): Promise<void> {
    const { replicas, weights } = this;
    const engine = replicas.engineOf(s);
    const m = replicas.model(s.model);
    const { resumed } = s.memory;
    this.memory.record(s, 'resuming');
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
        // Tags kept through the phase that left are resident too: nothing of this engine is released now.
        s.memory.released = false;
        this.memory.record(s, 'resident');
        replicas.setState(s, 'ready');
      }
    } catch (e) {
      this.logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'onload failed');
      throw e;
    }
  }
}
