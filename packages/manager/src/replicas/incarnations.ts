import type { SGLangEngine } from '@uis/sglang-engine';
import type { InferenceRoleSpec, Logger } from '@uis/spec';
import type { Launcher, LaunchRequest } from '../launchers.ts';
import { errorMessage } from '../runtime.ts';
import type { EngineRecords } from './engine-records.ts';
import type { ResolvedManagerOptions } from './init.ts';
import type { MemoryLedger } from './memory-ledger.ts';
import type { Slot } from './types.ts';
import type { WeightSync } from './weight-sync.ts';

/** Called when a running incarnation's process exits (the health part declares the replica dead). */
export type ExitListener = (s: Slot, reason: string) => void;

/** Each incarnation of a replica: its engine created by the launcher (or attached by URL), started, its weight
 * version read, recorded; stopped again. Owns `slot.engine` and `slot.baseUrl`. */
export class Incarnations {
  readonly #exitListeners: ExitListener[] = [];

  constructor(
    private readonly role: InferenceRoleSpec['role'],
    private readonly launcher: Launcher,
    private readonly weights: WeightSync,
    private readonly memory: MemoryLedger,
    private readonly records: EngineRecords | null,
    private readonly opts: Pick<ResolvedManagerOptions, 'startDeadlineMs'>,
    private readonly logger: Logger,
  ) {}

  /** `listener` hears of every incarnation that exits after it was up (not of a start that fails: the caller of
   * `launch` gets that error). */
  onExit(listener: ExitListener): void {
    this.#exitListeners.push(listener);
  }

  launchRequest(s: Slot): LaunchRequest {
    return {
      role: this.role,
      model: s.spec,
      group: s.group,
      placement: s.placement,
      replica: s.replica,
      offload: this.memory.offloadEnabled(s),
      generation: s.generation,
    };
  }

  /** Gives a replica the client of an engine that runs already (attached by URL, adopted). */
  attach(s: Slot, engine: SGLangEngine): void {
    s.engine = engine;
    s.baseUrl = engine.baseUrl;
  }

  /** Stops what is left of a replica's incarnation (never an external engine's processes). */
  async stop(s: Slot): Promise<void> {
    if (s.engine && !s.external) {
      await s.engine.shutdown(2_000).catch(() => undefined);
      s.engine = null;
      this.records?.forget(s.engineId);
    }
  }

  /** Creates the engine (launcher), starts it (launch + healthy + flush) and reads its weight version. */
  async launch(s: Slot, signal?: AbortSignal): Promise<void> {
    // A free port can be taken by another process between the probe and the engine's bind: one more try.
    for (let attempt = 1; ; attempt++) {
      const engine = s.external && s.engine ? s.engine : await this.launcher.create(this.launchRequest(s));
      this.attach(s, engine);
      const epoch = s.epoch;
      let up = false;
      engine.onExit((e) => {
        // Before it is up, a failed start is reported by start() itself (and rolled back by the caller).
        if (!up || s.epoch !== epoch || s.engine !== engine) return;
        const reason = `process exited (node ${e.nodeRank}, code ${e.code}, signal ${e.signal})`;
        for (const listener of this.#exitListeners) listener(s, reason);
      });
      try {
        await engine.start({ deadlineMs: this.opts.startDeadlineMs, ...(signal ? { signal } : {}) });
      } catch (e) {
        if (attempt < 2 && !s.external && /EADDRINUSE|address already in use/i.test(errorMessage(e))) {
          this.logger.warn({ engineId: s.engineId }, 'port taken before the engine bound it; relaunching');
          await engine.shutdown(2_000).catch(() => undefined);
          continue;
        }
        throw e;
      }
      up = true;
      await this.weights.readVersion(s);
      this.memory.launched(s);
      this.records?.launched(s);
      return;
    }
  }
}
