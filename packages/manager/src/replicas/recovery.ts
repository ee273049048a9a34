import { errorMessage } from '../runtime.ts';
import type { ManagerContext } from './context.ts';
import type { Slot } from './types.ts';

/** Health checks, death and restarts: owns `slot.health` (consecutive failures, the restart running or deferred
 * to the next onload, the background recovery a drain waits for) and `slot.generation`. The rules of
 * `restarting`, `restartPending` and `recovery` live here and nowhere else. */
export class Recovery {
  readonly #stop = new AbortController();
  #loop: Promise<void> | null = null;
  readonly #background = new Set<Promise<unknown>>();

  constructor(
    private readonly ctx: ManagerContext,
    private readonly ownsProcesses: boolean,
  ) {}

  /** Checks every replica each `healthIntervalMs` until `stop()`. */
  start(): void {
    const signal = this.#stop.signal;
    const { clock, opts, logger, role } = this.ctx;
    this.#loop = (async () => {
      while (!signal.aborted) {
        try {
          await clock.sleep(opts.healthIntervalMs, signal);
        } catch {
          return;
        }
        // One replica's failure to be marked (a publish, an audit write) must not end the loop for the others.
        const checks = await Promise.allSettled(this.ctx.replicas.all().map((s) => this.checkHealth(s)));
        for (const c of checks)
          if (c.status === 'rejected')
            logger.error({ role, err: errorMessage(c.reason) }, 'health check handling failed');
      }
    })();
  }

  /** Ends the health loop and every restart backoff; resolves once the background recoveries gave up. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    await Promise.allSettled([...this.#background]);
  }

  /** Background recoveries running for `slots`. */
  running(slots: Slot[]): Array<Promise<void>> {
    return slots.flatMap((s) => (s.health.recovery ? [s.health.recovery] : []));
  }

  /** Replicas whose restart waits for their model's onload. */
  pendingRestarts(slots: Slot[]): Slot[] {
    return slots.filter((s) => s.state === 'dead' && s.health.restartPending);
  }

  /** The onload that a deferred restart waited for: one attempt, errors thrown. */
  restartNow(s: Slot): Promise<void> {
    s.health.restartPending = false;
    return this.restart(s, false);
  }

  /** The operator's restart: stop the replica now, relaunch it now unless its model sleeps (then at its next
   * onload). Whether it relaunched. */
  async operatorRestart(s: Slot): Promise<boolean> {
    if (s.state !== 'dead') await this.markDead(s, 'restart requested by operator', false);
    await this.restart(s, false);
    return !s.health.restartPending;
  }

  /** A fresh incarnation passed its start: no failures counted against it. */
  launched(s: Slot): void {
    s.health.failures = 0;
  }

  private async checkHealth(s: Slot): Promise<void> {
    if (
      s.state === 'dead' ||
      s.state === 'starting' ||
      s.health.restarting ||
      !s.engine ||
      this.ctx.queue.closed
    )
      return;
    const epoch = s.epoch;
    const endpoint = `GET ${s.engine.baseUrl}/health`;
    let failure: string | null;
    try {
      const ok = await s.engine.client.health({ timeoutMs: this.ctx.opts.healthTimeoutMs });
      failure = ok ? null : `${endpoint}: answered 5xx`;
    } catch (e) {
      failure = errorMessage(e);
    }
    if (s.epoch !== epoch || this.ctx.queue.closed) return;
    if (failure === null) {
      s.health.failures = 0;
      return;
    }
    s.health.failures++;
    if (s.health.failures >= this.ctx.opts.failuresToDead)
      await this.markDead(s, `${s.health.failures} failed health checks (last: ${failure})`, true);
  }

  /** Publishes the replica dead and, with fault tolerance, restarts it in the background with backoff. */
  async markDead(s: Slot, reason: string, recover: boolean): Promise<void> {
    const { replicas, logger } = this.ctx;
    if (s.state === 'dead' || this.ctx.queue.closed || !replicas.has(s)) return;
    replicas.setState(s, 'dead');
    replicas.invalidate(s);
    logger.warn({ engineId: s.engineId, reason }, 'replica dead');
    this.ctx.audit('replica.dead', s.engineId, { reason, generation: s.generation });
    await this.ctx.routers.sync().catch(() => undefined);
    this.ctx.publication.publish();
    // A dead replica this manager launched is stopped at once: its processes are gone, so is its GPU memory, and
    // the coordinator may count it as released. An external engine's memory stays unproven.
    if (!s.external && this.ownsProcesses && s.engine) {
      try {
        await s.engine.shutdown(2_000);
        this.ctx.residency.processesStopped(s);
      } catch (e) {
        logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'could not stop dead replica');
      }
    }
    if (recover && s.spec.fault_tolerance_enabled) {
      // restart() itself defers to the model's next onload when the model sleeps.
      const p = this.restart(s, true).catch((e) => {
        logger.error({ engineId: s.engineId, err: errorMessage(e) }, 'recovery gave up');
      });
      this.#background.add(p);
      s.health.recovery = p;
      void p.finally(() => {
        this.#background.delete(p);
        if (s.health.recovery === p) s.health.recovery = null;
      });
    }
  }

  /** dead -> starting (new generation) -> healthy -> weights synced -> ready (eligible only at the target
   * version) -> back to sleep if the model is sleeping. Retries with exponential backoff until it works or the
   * manager shuts down (`retry` false: one attempt, errors thrown). */
  private async restart(s: Slot, retry: boolean): Promise<void> {
    if (s.health.restarting) return;
    s.health.restarting = true;
    let backoff = this.ctx.opts.restartBackoffMs;
    try {
      for (;;) {
        if ((await this.attempt(s, retry, backoff)) === 'done') return;
        try {
          await this.ctx.clock.sleep(backoff, this.#stop.signal);
        } catch {
          return;
        }
        backoff = Math.min(backoff * 2, this.ctx.opts.restartBackoffMaxMs);
      }
    } finally {
      s.health.restarting = false;
    }
  }

  /** One restart attempt: 'done' when the replica is back, given up (shutdown, removed), or deferred to the next
   * onload; 'failed' when a retry is due after `backoff`. */
  private async attempt(s: Slot, retry: boolean, backoff: number): Promise<'done' | 'failed'> {
    const { replicas, queue, pool, publication } = this.ctx;
    if (queue.closed || !replicas.has(s)) return 'done';
    // Stop what is left of the old incarnation first (never an external engine's processes).
    await pool.stopIncarnation(s);
    if (queue.closed) return 'done';
    // The model went to sleep while this replica was down (or an operator restarts a sleeping one): relaunching
    // now would put it next to the phase that holds the GPUs. The next onload restarts it.
    const m = replicas.model(s.model);
    if (s.state === 'dead' && m.desire === 'sleeping' && this.ctx.residency.offloadEnabled(s)) {
      s.health.restartPending = true;
      this.ctx.audit('replica.restart_deferred', s.engineId, { reason: 'model is sleeping' });
      return 'done';
    }
    s.generation++;
    replicas.setState(s, 'starting');
    publication.publish();
    try {
      await pool.launch(s);
      await this.ctx.weights.sync(s, m);
      if (queue.closed) return 'done';
      await this.ctx.residency.readyOrAsleep(s, m);
      await this.ctx.routers.sync();
      publication.publish();
      this.ctx.audit('replica.recovered', s.engineId, {
        generation: s.generation,
        weight_version: s.weightVersion,
      });
      return 'done';
    } catch (e) {
      this.ctx.logger.warn({ engineId: s.engineId, err: errorMessage(e), backoff }, 'restart failed');
      if (s.state !== 'dead') replicas.setState(s, 'dead');
      publication.publish();
      if (!retry) throw e;
      return 'failed';
    }
  }
}
