import type { MemoryTag } from '@uis/sglang-engine';
import type { SimOptions } from './options.ts';

/** The simulator's memory by tag and time by bytes. An engine holds, on each of its GPUs, its weights (the model's
 * bytes split over tp x pp), its KV cache (a share of the GPU) and its CUDA graphs; engines of one process that
 * name the same GPUs (`--sim-gpus node-0:0,...`, as `uis demo` does) share them. Releasing or resuming a tag takes
 * bytes / bandwidth for weights with a CPU backup (pinned copies) and one allocation + free otherwise; a weight update
 * from disk takes bytes / the pageable bandwidth, one from tensors bytes / the pinned bandwidth (the call that flushes
 * the cache, SGLang's default and a bucketed trainer's last bucket, completes the engine's weights). A resume that does not fit fails as SGLang's does: its scheduler
 * raises CUDA's out-of-memory error and the server goes down (`run_scheduler_process` signals its parent on any
 * exception), resuming in SGLang's order (`resume_memory_occupation`: cuda_graph, weights, kv_cache). */

const GB = 1e9;

/** SGLang 0.5.23 `SchedulerWeightUpdater.resume_memory_occupation`'s order. */
const SGLANG_RESUME_ORDER: readonly MemoryTag[] = ['cuda_graph', 'weights', 'kv_cache'];

/** Who holds how many bytes of which tag on each GPU of a process. */
export class SimGpuLedger {
  readonly #held = new Map<string, Map<object, Map<MemoryTag, number>>>();
  /** When each GPU's host link is free again: copies of engines sharing a GPU queue on its one PCIe link. */
  readonly #linkFree = new Map<string, number>();

  /** Queues a copy of `ms` on the links of `gpus` from `now`; the milliseconds until it is done. */
  copy(gpus: readonly string[], ms: number, now: number): number {
    if (ms <= 0) return 0;
    const start = Math.max(now, ...gpus.map((g) => this.#linkFree.get(g) ?? now));
    for (const g of gpus) this.#linkFree.set(g, start + ms);
    return start + ms - now;
  }

  used(gpu: string): number {
    let sum = 0;
    for (const tags of this.#held.get(gpu)?.values() ?? []) for (const b of tags.values()) sum += b;
    return sum;
  }

  hold(gpu: string, owner: object, tag: MemoryTag, bytes: number): void {
    let owners = this.#held.get(gpu);
    if (!owners) {
      owners = new Map();
      this.#held.set(gpu, owners);
    }
    let tags = owners.get(owner);
    if (!tags) {
      tags = new Map();
      owners.set(owner, tags);
    }
    tags.set(tag, bytes);
  }

  /** Frees the owner's `tag` (every tag when none is given) on every GPU. */
  free(owner: object, tag?: MemoryTag): void {
    for (const owners of this.#held.values()) {
      const tags = owners.get(owner);
      if (!tags) continue;
      if (tag === undefined) owners.delete(owner);
      else tags.delete(tag);
    }
  }
}

/** Engines of one process share GPUs that have the same name. */
export const PROCESS_GPUS = new SimGpuLedger();

let anonymous = 0;

export class SimMemoryModel {
  readonly gpus: string[];
  readonly capacity: number;
  readonly bytes: Record<MemoryTag, number>;

  constructor(
    private readonly o: SimOptions,
    private readonly ledger: SimGpuLedger,
    private readonly owner: object,
  ) {
    const perProcess = Math.max(1, Math.floor((o.tpSize * o.ppSize) / o.nnodes));
    const named = o.simGpus?.split(',').filter((g) => g.length > 0);
    const id = ++anonymous;
    // Unnamed GPUs are this engine's alone: engines in one test process do not share memory by accident.
    this.gpus = named ?? Array.from({ length: perProcess }, (_, i) => `engine-${id}:${i}`);
    this.capacity = Math.round(o.simGpuMemoryGb * GB);
    this.bytes = {
      weights: Math.ceil((o.simWeightGb * GB) / (o.tpSize * o.ppSize)),
      kv_cache: Math.floor(o.simKvCacheShare * this.capacity),
      cuda_graph: Math.round(o.simCudaGraphGb * GB),
    };
  }

  /** Whether the bytes model is on (a model size was given). */
  static sized(o: SimOptions): boolean {
    return o.simWeightGb > 0;
  }

  /** Seconds to release or resume one tag on one GPU (every GPU of the engine copies in parallel). */
  tagSeconds(tag: MemoryTag): number {
    if (tag === 'weights' && this.o.enableWeightsCpuBackup)
      return this.bytes.weights / (this.o.simPinnedGbps * GB);
    return this.o.simAllocFreeS / 2;
  }

  /** Milliseconds to release or resume `tags` from `now`: the weights' copy waits for the GPUs' links. */
  ms(tags: readonly MemoryTag[], now: number): number {
    const copy =
      tags.includes('weights') && this.o.enableWeightsCpuBackup ? this.tagSeconds('weights') * 1000 : 0;
    const alloc = tags.reduce((s, t) => s + this.tagSeconds(t), 0) * 1000 - copy;
    return this.ledger.copy(this.gpus, copy, now) + alloc;
  }

  /** A weight update from disk: the weights of one GPU through pageable memory, on the GPUs' links. */
  syncMs(now: number): number {
    return this.ledger.copy(this.gpus, (this.bytes.weights / (this.o.simPageableGbps * GB)) * 1000, now);
  }

  /** A weight update from tensors a colocated trainer pushed (CUDA IPC from its pinned CPU copy): the weights of one
   * GPU at the pinned speed, on the GPUs' links. */
  tensorSyncMs(now: number): number {
    return this.ledger.copy(this.gpus, (this.bytes.weights / (this.o.simPinnedGbps * GB)) * 1000, now);
  }

  /** get_server_info's `memory_usage` as `version` reports it, in GiB per GPU: rounded to 2 places with the CUDA
   * graphs as one number up to 0.5.15.post1, to 3 places with them per captured phase from 0.5.17. */
  memoryUsage(version: string): Record<string, unknown> {
    const [major = 0, minor = 0, patch = 0] = version.split('.').map((x) => Number.parseInt(x, 10) || 0);
    const perPhase = major > 0 || minor > 5 || (minor === 5 && patch >= 17);
    const places = perPhase ? 1000 : 100;
    const gib = (bytes: number) => Math.round((bytes / 2 ** 30) * places) / places;
    return {
      weight: gib(this.bytes.weights),
      kvcache: gib(this.bytes.kv_cache),
      graph: perPhase ? { decode: gib(this.bytes.cuda_graph) } : gib(this.bytes.cuda_graph),
    };
  }

  holdAll(): void {
    for (const t of SGLANG_RESUME_ORDER) this.hold(t);
  }

  hold(tag: MemoryTag): void {
    for (const g of this.gpus) this.ledger.hold(g, this.owner, tag, this.bytes[tag]);
  }

  free(tag?: MemoryTag): void {
    this.ledger.free(this.owner, tag);
  }

  /** Allocates `tags` when the resume starts (a second resume on the same GPUs meanwhile sees them taken); the
   * out-of-memory error of the first that does not fit instead, allocating nothing. */
  allocate(tags: readonly MemoryTag[]): string | null {
    const { order, oom } = this.resumePlan(tags);
    if (oom === null) for (const t of order) this.hold(t);
    return oom;
  }

  /** The tags in SGLang's resume order, and the first that would not fit with what it names, or null. */
  resumePlan(tags: readonly MemoryTag[]): { order: MemoryTag[]; oom: string | null } {
    const order = SGLANG_RESUME_ORDER.filter((t) => tags.includes(t));
    const extra = new Map<string, number>();
    for (const t of order) {
      for (const g of this.gpus) {
        const used = this.ledger.used(g) + (extra.get(g) ?? 0);
        if (used + this.bytes[t] > this.capacity)
          return {
            order,
            oom: `CUDA error: out of memory (resume_memory_occupation of ${t}: tried to allocate ${this.bytes[t]} bytes on GPU ${g} with ${used} of ${this.capacity} bytes in use)`,
          };
        extra.set(g, (extra.get(g) ?? 0) + this.bytes[t]);
      }
    }
    return { order, oom: null };
  }
}
