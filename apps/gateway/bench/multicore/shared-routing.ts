/**
 * The multi-core prototype's routing state, in one SharedArrayBuffer that every serving worker thread and the
 * owning (control-plane) thread map: exact across workers because every change is one atomic operation on it, not
 * a message. Per replica: in-flight count, eligibility (the owner's drain flag), consecutive failures and the
 * circuit's open-until time; per role: the admission count.
 *
 * - least outstanding: a worker reads every eligible replica's count and takes the smallest with a compare-and-swap
 *   (count -> count + 1); a lost race rescans. Every decision is one a single-threaded gateway could have made in
 *   some order of the same requests.
 * - drain: the owner clears `eligible`, then waits for the count to reach 0. A worker increments first and checks
 *   `eligible` after (both sequentially consistent), so either it sees the flag cleared and gives the slot back, or
 *   the owner's wait sees its count: no request slips onto a draining replica unseen.
 * - admission: one counter with a compare-and-swap against the limit (exactly `limit` at once across all workers).
 * - circuits: failures counted atomically; the worker whose failure crosses the threshold opens the circuit.
 * - affinity: Relax's rule is a pure function of (key, replica ids) (highest hash wins), so it needs no shared state.
 */

const HEADER = 4; // [0] admission active, [1] admission limit, [2] topology epoch, [3] replicas
const PER_REPLICA = 4; // in-flight, eligible, consecutive failures, spare
const ADMISSION = 0;
const LIMIT = 1;
const EPOCH = 2;
const COUNT = 3;

export interface SharedRoutingBuffers {
  ints: SharedArrayBuffer;
  /** Per replica: the time (ms, the owner's clock origin) its open circuit may be probed again. */
  openUntil: SharedArrayBuffer;
}

export class SharedRouting {
  readonly #i: Int32Array;
  readonly #open: Float64Array;
  readonly replicas: number;

  /** The owner creates the buffers; workers map the same ones (`from`). */
  static create(replicas: number, admissionLimit: number): SharedRouting {
    const ints = new SharedArrayBuffer((HEADER + PER_REPLICA * replicas) * 4);
    const openUntil = new SharedArrayBuffer(8 * replicas);
    const s = new SharedRouting({ ints, openUntil });
    Atomics.store(s.#i, LIMIT, admissionLimit);
    Atomics.store(s.#i, COUNT, replicas);
    for (let r = 0; r < replicas; r++) s.setEligible(r, true);
    return s;
  }

  constructor(readonly buffers: SharedRoutingBuffers) {
    this.#i = new Int32Array(buffers.ints);
    this.#open = new Float64Array(buffers.openUntil);
    this.replicas = Atomics.load(this.#i, COUNT) || (this.#i.length - HEADER) / PER_REPLICA;
  }

  #at(replica: number, field: number): number {
    return HEADER + replica * PER_REPLICA + field;
  }

  // ---- admission -------------------------------------------------------------------------------------------------

  /** Takes one of the role's slots; false when `limit` requests are already forwarded (by any worker). */
  admit(): boolean {
    const i = this.#i;
    const limit = Atomics.load(i, LIMIT);
    for (;;) {
      const n = Atomics.load(i, ADMISSION);
      if (n >= limit) return false;
      if (Atomics.compareExchange(i, ADMISSION, n, n + 1) === n) return true;
    }
  }

  leave(): void {
    Atomics.sub(this.#i, ADMISSION, 1);
  }

  get admitted(): number {
    return Atomics.load(this.#i, ADMISSION);
  }

  // ---- in-flight and least outstanding ---------------------------------------------------------------------------

  inFlight(replica: number): number {
    return Atomics.load(this.#i, this.#at(replica, 0));
  }

  /** The eligible replica with the fewest requests in flight (not in `exclude`, circuit allowing at `now`), its count
   * already incremented; -1 when none. */
  pickLeastOutstanding(now: number, exclude?: ReadonlySet<number>): number {
    const i = this.#i;
    for (;;) {
      let best = -1;
      let bestCount = Number.POSITIVE_INFINITY;
      for (let r = 0; r < this.replicas; r++) {
        if (exclude?.has(r) || Atomics.load(i, this.#at(r, 1)) === 0 || !this.allows(r, now)) continue;
        const c = Atomics.load(i, this.#at(r, 0));
        if (c < bestCount) {
          best = r;
          bestCount = c;
        }
      }
      if (best < 0) return -1;
      const slot = this.#at(best, 0);
      if (Atomics.compareExchange(i, slot, bestCount, bestCount + 1) !== bestCount) continue; // lost a race
      if (Atomics.load(i, this.#at(best, 1)) === 1) return best;
      Atomics.sub(i, slot, 1); // drained between the scan and the increment: the owner may be waiting on it
    }
  }

  release(replica: number): void {
    Atomics.sub(this.#i, this.#at(replica, 0), 1);
  }

  // ---- the owner's drain flag ------------------------------------------------------------------------------------

  setEligible(replica: number, eligible: boolean): void {
    Atomics.store(this.#i, this.#at(replica, 1), eligible ? 1 : 0);
    Atomics.add(this.#i, EPOCH, 1);
  }

  // ---- circuits --------------------------------------------------------------------------------------------------

  allows(replica: number, now: number): boolean {
    return Atomics.load(this.#i, this.#at(replica, 2)) < FAILURE_THRESHOLD || now >= this.#open[replica]!;
  }

  failure(replica: number, now: number, openMs: number): void {
    if (Atomics.add(this.#i, this.#at(replica, 2), 1) + 1 === FAILURE_THRESHOLD)
      this.#open[replica] = now + openMs;
  }

  success(replica: number): void {
    if (Atomics.load(this.#i, this.#at(replica, 2)) !== 0) Atomics.store(this.#i, this.#at(replica, 2), 0);
  }
}

const FAILURE_THRESHOLD = 5;
