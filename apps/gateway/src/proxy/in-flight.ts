/** In-flight forwarded requests per target id: the routing policy's load signal and the drain condition. */
export class InFlightCounter {
  /** A counter object per target with requests in flight: one map lookup per acquire and release, no set. */
  readonly #counts = new Map<string, { n: number }>();
  #total = 0;

  acquire(targetId: string): void {
    const c = this.#counts.get(targetId);
    if (c === undefined) this.#counts.set(targetId, { n: 1 });
    else c.n++;
    this.#total++;
  }

  release(targetId: string): void {
    const c = this.#counts.get(targetId);
    if (c === undefined) throw new Error(`in-flight release without acquire for target ${targetId}`);
    if (--c.n === 0) this.#counts.delete(targetId);
    this.#total--;
  }

  get(targetId: string): number {
    return this.#counts.get(targetId)?.n ?? 0;
  }

  get total(): number {
    return this.#total;
  }

  /** A copy of the non-zero counts. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, c] of this.#counts) out[id] = c.n;
    return out;
  }
}
