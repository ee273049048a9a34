import { type EngineRecords, type RecordedMemory, SETTLED_MEMORY } from './engine-records.ts';
import { ALL_TAGS, type Slot } from './types.ts';

/** What is known of each engine's GPU memory: `slot.memory` at a launch and when its processes stop, the durable
 * record written around every memory call (a restart adopts only engines whose record is settled), and the engines
 * whose memory is in doubt after a restart (recorded processes that run but cannot be verified), which the
 * coordinator reads before it resumes a transition. */
export class MemoryLedger {
  /** engine id -> why its GPU memory is not known. */
  readonly #inDoubt = new Map<string, string>();

  constructor(
    private readonly records: EngineRecords | null,
    /** The role's deployment offloads (a placement may offload on its own). */
    private readonly roleOffloads: boolean,
  ) {}

  /** Whether the replica releases its memory when it drains. */
  offloadEnabled(s: Slot): boolean {
    return s.placement.offload || this.roleOffloads;
  }

  /** A fresh incarnation holds all its memory. */
  launched(s: Slot): void {
    s.memory.released = false;
    s.memory.resumed = new Set(ALL_TAGS);
  }

  /** The incarnation's processes were stopped: its GPU memory is free. */
  processesStopped(s: Slot): void {
    s.memory.released = true;
    this.records?.forget(s.engineId);
    this.settled(s.engineId);
  }

  /** Writes the engine's memory state durably: before a memory call (in doubt until it answers) and after. */
  record(s: Slot, memory: RecordedMemory): void {
    this.records?.memory(s, memory);
    if (SETTLED_MEMORY.includes(memory)) this.settled(s.engineId);
  }

  doubt(engineId: string, why: string): void {
    this.#inDoubt.set(engineId, why);
  }

  /** Engines of this role whose GPU memory is not known, each with the reason. */
  inDoubt(): string[] {
    return [...this.#inDoubt].map(([id, why]) => `${id} (${why})`);
  }

  /** A drain or onload of the engine answered: its memory is known again. */
  settled(engineId: string): void {
    this.#inDoubt.delete(engineId);
  }
}
