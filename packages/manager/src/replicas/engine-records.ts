import {
  type MemoryTag,
  MemoryTagSchema,
  type PauseMode,
  PauseModeSchema,
  type RecordedProcess,
  recordProcesses,
} from '@uis/sglang-engine';
import type { Clock } from '@uis/spec';
import { z } from 'zod';
import type { Db } from '../store.ts';
import type { Slot } from './types.ts';

/** An engine's GPU memory as last written: `resident` and `released` were written after the engine acknowledged
 * the call; `releasing` and `resuming` before a call whose answer never came back (the control plane died
 * during it, or it failed): the engine's memory is then in doubt. */
export const RecordedMemorySchema = z.enum(['resident', 'released', 'releasing', 'resuming']);
export type RecordedMemory = z.infer<typeof RecordedMemorySchema>;

/** Settled record states: what the engine holds is what the record says. */
export const SETTLED_MEMORY: readonly RecordedMemory[] = ['resident', 'released'];

/** One engine a control plane launched, as the `engines` table keeps it. */
export interface EngineRecord {
  role: string;
  engine_id: string;
  model: string;
  model_path: string;
  base_url: string;
  processes: RecordedProcess[];
  generation: number;
  weight_version: string | null;
  memory: RecordedMemory;
  /** The tags it holds, in resume order (rows written before tags were recorded: all when resident, else none). */
  resident_tags: MemoryTag[];
  paused: PauseMode | null;
  updated_at: number;
}

const ProcessesSchema = z.array(
  z.object({ pid: z.number().int().positive(), startTime: z.string().nullable() }),
);

interface EngineRow {
  role: string;
  engine_id: string;
  model: string;
  model_path: string;
  base_url: string;
  processes: string;
  generation: number;
  weight_version: string | null;
  memory: string;
  resident_tags: string | null;
  paused: string | null;
  updated_at: number;
}

/** The `engines` table, one role's rows: every engine this role launched and has not stopped yet, with what a
 * restarted control plane needs to find it again (URL, pids and their start times, model, weight version, memory
 * state). The only code that reads or writes the table. Written in every mode; read back at start. */
export class EngineRecords {
  readonly #list;
  readonly #upsert;
  readonly #memory;
  readonly #weight;
  readonly #delete;

  constructor(
    private readonly db: Db,
    private readonly role: string,
    private readonly clock: Clock,
  ) {
    this.#list = db.prepare('SELECT * FROM engines WHERE role = ? ORDER BY engine_id');
    this.#upsert = db.prepare(
      `INSERT INTO engines (role, engine_id, model, model_path, base_url, processes, generation, weight_version,
         memory, resident_tags, paused, updated_at)
       VALUES (@role, @engine_id, @model, @model_path, @base_url, @processes, @generation, @weight_version,
         @memory, @resident_tags, @paused, @updated_at)
       ON CONFLICT(role, engine_id) DO UPDATE SET model = @model, model_path = @model_path, base_url = @base_url,
         processes = @processes, generation = @generation, weight_version = @weight_version, memory = @memory,
         resident_tags = @resident_tags, paused = @paused, updated_at = @updated_at`,
    );
    this.#memory = db.prepare(
      'UPDATE engines SET memory = ?, resident_tags = ?, paused = ?, updated_at = ? WHERE role = ? AND engine_id = ?',
    );
    this.#weight = db.prepare(
      'UPDATE engines SET weight_version = ?, updated_at = ? WHERE role = ? AND engine_id = ?',
    );
    this.#delete = db.prepare('DELETE FROM engines WHERE role = ? AND engine_id = ?');
  }

  /** Roles that have recorded engines in `db`. */
  static roles(db: Db): string[] {
    return (
      db.prepare('SELECT DISTINCT role FROM engines ORDER BY role').all() as Array<{ role: string }>
    ).map((r) => r.role);
  }

  /** The role's recorded engines (rows a later version cannot read are skipped: nothing is adopted from them). */
  list(): EngineRecord[] {
    return (this.#list.all(this.role) as EngineRow[]).flatMap((row) => {
      const processes = ProcessesSchema.safeParse(JSON.parse(row.processes));
      const memory = RecordedMemorySchema.safeParse(row.memory);
      const paused = row.paused === null ? null : PauseModeSchema.safeParse(row.paused);
      const tags = z
        .array(MemoryTagSchema)
        .safeParse(
          row.resident_tags === null
            ? memory.data === 'resident'
              ? MemoryTagSchema.options
              : []
            : JSON.parse(row.resident_tags),
        );
      if (!processes.success || !memory.success || !tags.success || (paused !== null && !paused.success))
        return [];
      return [
        {
          ...row,
          processes: processes.data,
          memory: memory.data,
          resident_tags: tags.data,
          paused: paused?.data ?? null,
        },
      ];
    });
  }

  /** A fresh incarnation is up (resident, not paused), or an adopted one is kept with what it reports. */
  launched(s: Slot, memory: RecordedMemory = 'resident', paused: PauseMode | null = null): void {
    const engine = s.engine;
    if (!engine || s.external) return;
    this.#upsert.run({
      role: this.role,
      engine_id: s.engineId,
      model: s.model,
      model_path: s.spec.model_path,
      base_url: engine.baseUrl,
      // An adopted engine's pids still run since their recorded start: reading /proc again gives the same times.
      processes: JSON.stringify(recordProcesses(engine.pids())),
      generation: s.generation,
      weight_version: s.weightVersion,
      memory,
      resident_tags: residentTags(s),
      paused,
      updated_at: this.clock.now(),
    });
  }

  /** The engine's memory state, written before a memory call (`releasing`, `resuming`) and after it answered. */
  memory(s: Slot, memory: RecordedMemory): void {
    if (s.external) return;
    const paused = s.engine?.pausedMode ?? null;
    this.#memory.run(memory, residentTags(s), paused, this.clock.now(), this.role, s.engineId);
  }

  /** Runs `fn` (which writes rows) as one transaction. */
  batch(fn: () => void): void {
    this.db.transaction(fn)();
  }

  weight(s: Slot): void {
    if (s.external) return;
    this.#weight.run(s.weightVersion, this.clock.now(), this.role, s.engineId);
  }

  /** The engine's processes were stopped (or found gone): nothing of it is left to find. */
  forget(engineId: string): void {
    this.#delete.run(this.role, engineId);
  }
}

/** The tags the slot holds, in SGLang's tag order, as the table keeps them. */
const residentTags = (s: Slot): string =>
  JSON.stringify(MemoryTagSchema.options.filter((t) => s.memory.resumed.has(t)));
