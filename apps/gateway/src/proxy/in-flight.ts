/** In-flight forwarded requests per target id: the routing policy's load signal and the drain condition. */
export class InFlightCounter {
  readonly #counts = new Map<string, number>();
  #total = 0;

  acquire(targetId: string): void {
    this.#counts.set(targetId, (this.#counts.get(targetId) ?? 0) + 1);
    this.#total++;
  }

  release(targetId: string): void {
    const n = this.#counts.get(targetId) ?? 0;
    if (n <= 0) throw new Error(`in-flight release without acquire for target ${targetId}`);
    if (n === 1) this.#counts.delete(targetId);
    else this.#counts.set(targetId, n - 1);
    this.#total--;
  }

  get(targetId: string): number {
    return this.#counts.get(targetId) ?? 0;
  }

  get total(): number {
    return this.#total;
  }

  /** A copy of the non-zero counts. */
  snapshot(): Record<string, number> {
    return Object.fromEntries(this.#counts);
  }
}
