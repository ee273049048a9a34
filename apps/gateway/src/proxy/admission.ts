import { UisError } from '@uis/spec';

/** A request waiting for (or holding) one of a role's admission slots. */
export interface Admittable {
  /** A slot is this request's: forward it now. */
  admitted(): void;
  /** No slot and no room to wait (or the wait timed out): answer 503 with `Retry-After`. */
  turnedAway(err: UisError, retryAfterSeconds: number): void;
}

export interface AdmissionOptions {
  /** Requests a role forwards at once. */
  limit: number;
  /** Requests that may wait for a slot (beyond: 503 at once). */
  queue: number;
  /** Longest wait in the queue (then 503). */
  queueTimeoutMs: number;
}

/**
 * A role's admission limit: at most `limit` requests forwarded at once, then up to `queue` more wait in arrival
 * order for `queueTimeoutMs`; anything beyond is 503 `admission_rejected` + Retry-After. Engines are protected from
 * an overload the gateway would otherwise pass straight on. Callback-based: the hot path allocates nothing unless a
 * request has to wait.
 */
export class AdmissionGate {
  #active = 0;
  readonly #waiting = new Map<Admittable, NodeJS.Timeout>();
  constructor(readonly opts: AdmissionOptions) {}

  get active(): number {
    return this.#active;
  }

  get waiting(): number {
    return this.#waiting.size;
  }

  enter(w: Admittable): void {
    if (this.#active < this.opts.limit) {
      this.#active++;
      w.admitted();
      return;
    }
    if (this.#waiting.size >= this.opts.queue) {
      w.turnedAway(this.#refusal(`${this.opts.limit} requests in flight and ${this.opts.queue} waiting`), 1);
      return;
    }
    const timer = setTimeout(() => {
      this.#waiting.delete(w);
      w.turnedAway(this.#refusal(`no slot within ${this.opts.queueTimeoutMs} ms`), 1);
    }, this.opts.queueTimeoutMs);
    this.#waiting.set(w, timer);
  }

  /** A request that held a slot ended: the longest waiter gets it. */
  leave(): void {
    // No iterator made when nobody waits (every request leaves; few ever wait).
    if (this.#waiting.size > 0)
      for (const [next, timer] of this.#waiting) {
        clearTimeout(timer);
        this.#waiting.delete(next);
        next.admitted();
        return;
      }
    this.#active--;
  }

  /** A waiter whose client left before it got a slot. */
  cancel(w: Admittable): void {
    const timer = this.#waiting.get(w);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.#waiting.delete(w);
  }

  #refusal(why: string): UisError {
    return new UisError({
      code: 'admission_rejected',
      path: 'role',
      message: `the role's admission limit is reached (${why}); retry after the Retry-After seconds`,
    });
  }
}
