import { type Clock, systemClock } from '@uis/spec';
/** Trainers waiting at one barrier: `group` null means the only group. */
export interface BarrierWait {
  group: string | null;
  phase: string;
  waiting: number;
  since: number;
}

/** Who waits at which trainer barrier right now: the console shows it, the coordinator does the waiting. */
export class BarrierBoard {
  private readonly waiting = new Map<
    string,
    { group: string | null; phase: string; count: number; since: number }
  >();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly clock: Clock = systemClock) {}

  /** Counts a waiter on (`group`, `phase`) while `wait` runs. */
  async wait<T>(group: string | null, phase: string, wait: () => Promise<T>): Promise<T> {
    const key = `${group ?? ''}\u0000${phase}`;
    const entry = this.waiting.get(key) ?? { group, phase, count: 0, since: this.clock.now() };
    entry.count++;
    this.waiting.set(key, entry);
    this.changed();
    try {
      return await wait();
    } finally {
      entry.count--;
      if (entry.count === 0) this.waiting.delete(key);
      this.changed();
    }
  }

  /** Barriers with at least one waiter; `group` null means the only group. */
  list(): BarrierWait[] {
    return [...this.waiting.values()].map((e) => ({
      group: e.group,
      phase: e.phase,
      waiting: e.count,
      since: e.since,
    }));
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  private changed(): void {
    for (const l of [...this.listeners]) l();
  }
}
