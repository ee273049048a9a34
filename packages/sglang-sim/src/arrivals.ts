/**
 * Fault injection for the race SGLang leaves to its callers: a generation request has reached the server but its
 * tokenizer manager has not registered its rid yet, so an abort of that rid is dropped. While held, every
 * generation request that passed its checks waits here, before it is registered; released, they go on in order.
 */
export class Arrivals {
  #held = false;
  readonly #waiting: Array<() => void> = [];

  hold(): void {
    this.#held = true;
  }

  release(): void {
    this.#held = false;
    for (const go of this.#waiting.splice(0)) go();
  }

  /** Whether arrivals are held now. */
  get held(): boolean {
    return this.#held;
  }

  /** Requests waiting now. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves at once unless arrivals are held, then when they are released. */
  pass(): Promise<void> | undefined {
    if (!this.#held) return undefined;
    return new Promise<void>((go) => this.#waiting.push(go));
  }
}
