import {
  type ActivationGroupPlan,
  DEFAULT_GPU_TYPE,
  formatBytes,
  type GpuType,
  gbToBytes,
  H200,
  type ModelMove,
  type PhaseMemory,
  type PlacementPlan,
  perGpuTagBytes,
  RESUME_ORDER,
  type ResidentTag,
  type SchedulePrediction,
  type SwitchPlan,
  TRAIN_PHASE_RESIDENT,
  type UisConfig,
} from '@uis/spec';

/** The residency rule and the switch predictions, pure. In every phase, on every GPU, the phase's residents hold
 * all their tags (weights, KV cache, CUDA graphs) and the trainer its share; a tag of a model that is not resident
 * stays on its GPUs only while it fits there, released at the first switch into a phase where it does not, and
 * resumed at the switch into its own phase (weights before the KV cache). A switch costs, on its busiest GPU, the
 * release of what must go, then the resume of what comes back and the weight syncs: bytes / bandwidth for weights
 * copied from or to a CPU backup or synced from the trainer (copies of every engine on a GPU share its host link, so
 * they add up), one allocation + free per KV cache or CUDA graph (engines allocate side by side: the slowest
 * engine's count). */

/** One engine group of one model, as the memory model sees it. */
export interface MemItem {
  role: string;
  model: string;
  /** The model's config path, for violations. */
  path: string;
  /** Pool bundle indices it occupies. */
  gpus: readonly number[];
  /** Bytes per GPU by tag; null when the config does not size the model. */
  bytes: Record<ResidentTag, number> | null;
  /** Phase-less colocated slices are resident in every phase. */
  always: boolean;
  /** Weights are released to (and resumed from) a CPU copy. */
  backup: boolean;
  /** Weights come from the trainer: synced to the new version whenever training ran since its last phase. */
  trained: boolean;
  /** How a sync copies the weights: `pinned` for tensors a colocated trainer pushes (CUDA IPC from its pinned CPU
   * copy, as slime's and Relax's colocated updates do), `pageable` for a checkpoint read from disk or a broadcast. */
  syncCopy: 'pinned' | 'pageable';
}

export interface MemGpus {
  capacity: Float64Array;
  types: GpuType[];
  /** `node:gpu` per bundle, for messages. */
  label: (b: number) => string;
}

export interface MemGroup {
  items: MemItem[];
  gpus: MemGpus;
  /** Trainer bytes per bundle in its phase. */
  trainer: Float64Array;
}

export interface PhaseDef {
  name: string;
  residents: string[];
}

export interface Misfit {
  phase: number;
  gpu: number;
  load: number;
  capacity: number;
  parts: string[];
}

const half = (t: GpuType) => t.alloc_free_s / 2;

/** Seconds to release (or resume) one tag of `item` on a GPU of type `t`. */
function tagSeconds(item: MemItem, tag: ResidentTag, t: GpuType): number {
  const bytes = item.bytes?.[tag] ?? 0;
  if (tag === 'weights' && item.backup) return bytes / (t.pinned_gbps * 1e9);
  return half(t);
}

function isActive(item: MemItem, phase: PhaseDef): boolean {
  return item.always || phase.residents.includes(item.role);
}

/** Loads of every phase on every GPU with only the residents (all tags) and the trainer; the first misfit. */
function baseLoads(
  g: MemGroup,
  phases: readonly PhaseDef[],
): { loads: Float64Array[]; misfit: Misfit | null } {
  const size = g.gpus.capacity.length;
  const loads: Float64Array[] = [];
  let misfit: Misfit | null = null;
  phases.forEach((phase, pi) => {
    const load = phase.residents.includes(TRAIN_PHASE_RESIDENT)
      ? Float64Array.from(g.trainer)
      : new Float64Array(size);
    for (const it of g.items) {
      if (it.bytes === null || !isActive(it, phase)) continue;
      const sum = it.bytes.weights + it.bytes.kv_cache + it.bytes.cuda_graph;
      for (const b of it.gpus) load[b] = (load[b] ?? 0) + sum;
    }
    loads.push(load);
    if (misfit !== null) return;
    for (let b = 0; b < size; b++) {
      const cap = g.gpus.capacity[b] ?? 0;
      if ((load[b] ?? 0) > cap) {
        misfit = { phase: pi, gpu: b, load: load[b] ?? 0, capacity: cap, parts: partsOn(g, phase, b) };
        return;
      }
    }
  });
  return { loads, misfit };
}

/** What holds memory on GPU `b` in `phase`, for the message of a misfit. */
function partsOn(g: MemGroup, phase: PhaseDef, b: number): string[] {
  const out: string[] = [];
  if (phase.residents.includes(TRAIN_PHASE_RESIDENT) && (g.trainer[b] ?? 0) > 0)
    out.push(`trainer ${formatBytes(g.trainer[b] ?? 0)}`);
  for (const it of g.items) {
    if (it.bytes === null || !isActive(it, phase) || !it.gpus.includes(b)) continue;
    const { weights, kv_cache, cuda_graph } = it.bytes;
    out.push(
      `${it.model} ${formatBytes(weights)} weights + ${formatBytes(kv_cache)} kv_cache + ${formatBytes(cuda_graph)} cuda_graph`,
    );
  }
  return out;
}

/** For each (item, tag) not resident, how many phases after its own it stays on its GPUs (n - 1: it never moves).
 * Costlier tags claim the spare memory first; a tag stays only while it fits on every GPU of its item. */
function keepSpans(g: MemGroup, phases: readonly PhaseDef[], loads: Float64Array[]): Map<MemItem, number[]> {
  const n = phases.length;
  const spans = new Map<MemItem, number[]>();
  const candidates: Array<{ item: MemItem; tag: number; home: number; value: number }> = [];
  for (const item of g.items) {
    spans.set(item, [0, 0, 0]);
    if (item.bytes === null || item.always) continue;
    const home = phases.findIndex((p) => p.residents.includes(item.role));
    if (home < 0) continue;
    const type = g.gpus.types[item.gpus[0] ?? 0] ?? H200;
    RESUME_ORDER.forEach((tag, ti) => {
      candidates.push({ item, tag: ti, home, value: 2 * tagSeconds(item, tag, type) });
    });
  }
  candidates.sort((a, b) => b.value - a.value);
  for (const c of candidates) {
    const bytes = c.item.bytes?.[RESUME_ORDER[c.tag] as ResidentTag] ?? 0;
    let stay = 0;
    for (let d = 1; d < n; d++) {
      const load = loads[(c.home + d) % n] as Float64Array;
      if (!c.item.gpus.every((b) => (load[b] ?? 0) + bytes <= (g.gpus.capacity[b] ?? 0))) break;
      for (const b of c.item.gpus) load[b] = (load[b] ?? 0) + bytes;
      stay = d;
    }
    (spans.get(c.item) as number[])[c.tag] = stay;
  }
  return spans;
}

/** Whether the item's tag is on its GPUs in phase `pi`. */
function residentIn(
  item: MemItem,
  ti: number,
  pi: number,
  phases: readonly PhaseDef[],
  spans: Map<MemItem, number[]>,
) {
  const phase = phases[pi] as PhaseDef;
  if (isActive(item, phase)) return true;
  if (item.bytes === null) return false;
  const home = phases.findIndex((p) => p.residents.includes(item.role));
  if (home < 0) return false;
  const d = (pi - home + phases.length) % phases.length;
  return d <= (spans.get(item)?.[ti] ?? 0);
}

/** Whether training ran between the item's phase and its next entry (the cycle holds a train phase besides). */
function trainsBetween(phases: readonly PhaseDef[]): boolean {
  return phases.some((p) => p.residents.includes(TRAIN_PHASE_RESIDENT));
}

/** Per-GPU accumulators of one switch: copies share the GPU's one host link (they add up), while the allocations
 * and frees of different engines run side by side (the slowest one's count). */
interface SwitchScratch {
  relLink: Float64Array;
  relAlloc: Float64Array;
  resLink: Float64Array;
  resAlloc: Float64Array;
  sync: Float64Array;
  bytes: Float64Array;
}

/** Seconds of `tags` of `item` on a GPU of type `t`, split into the host-link copy and the allocations. */
function tagCost(item: MemItem, tags: readonly ResidentTag[], t: GpuType): { link: number; alloc: number } {
  let link = 0;
  let alloc = 0;
  for (const tag of tags) {
    if (tag === 'weights' && item.backup) link += tagSeconds(item, tag, t);
    else alloc += tagSeconds(item, tag, t);
  }
  return { link, alloc };
}

/** The switch from phase `pi` to the next one: moves per model, costs on the busiest GPU. */
function switchPlan(
  g: MemGroup,
  phases: readonly PhaseDef[],
  pi: number,
  spans: Map<MemItem, number[]>,
  scratch: SwitchScratch,
): SwitchPlan {
  const n = phases.length;
  const pj = (pi + 1) % n;
  const to = phases[pj] as PhaseDef;
  const { relLink, relAlloc, resLink, resAlloc, sync, bytes } = scratch;
  for (const a of Object.values(scratch)) a.fill(0);
  const moves = new Map<string, ModelMove>();
  for (const item of g.items) {
    const rel: ResidentTag[] = [];
    const res: ResidentTag[] = [];
    RESUME_ORDER.forEach((tag, ti) => {
      const was = residentIn(item, ti, pi, phases, spans);
      const will = residentIn(item, ti, pj, phases, spans);
      if (was && !will) rel.push(tag);
      if (!was && will) res.push(tag);
    });
    const entering = !isActive(item, phases[pi] as PhaseDef) && isActive(item, to);
    const synced =
      item.trained && ((entering && trainsBetween(phases)) || (res.includes('weights') && !item.backup));
    if (rel.length === 0 && res.length === 0 && !synced) continue;
    const w = item.bytes?.weights ?? 0;
    const copied =
      (item.backup ? w * ((rel.includes('weights') ? 1 : 0) + (res.includes('weights') ? 1 : 0)) : 0) +
      (synced ? w : 0);
    // An item's GPUs are almost always of one type: its costs are computed once per type met.
    let type: GpuType | null = null;
    let out = { link: 0, alloc: 0 };
    let back = out;
    let syncS = 0;
    for (const b of item.gpus) {
      const t = g.gpus.types[b] ?? H200;
      if (t !== type) {
        type = t;
        out = tagCost(item, rel, t);
        back = tagCost(item, res, t);
        syncS = synced ? w / ((item.syncCopy === 'pinned' ? t.pinned_gbps : t.pageable_gbps) * 1e9) : 0;
      }
      relLink[b] = (relLink[b] ?? 0) + out.link;
      relAlloc[b] = Math.max(relAlloc[b] ?? 0, out.alloc);
      resLink[b] = (resLink[b] ?? 0) + back.link;
      resAlloc[b] = Math.max(resAlloc[b] ?? 0, back.alloc);
      sync[b] = (sync[b] ?? 0) + syncS;
      bytes[b] = (bytes[b] ?? 0) + copied;
    }
    const key = `${item.role}/${item.model}`;
    const prev = moves.get(key);
    moves.set(key, {
      role: item.role,
      model: item.model,
      release: RESUME_ORDER.filter((t) => rel.includes(t) || (prev?.release.includes(t) ?? false)),
      resume: RESUME_ORDER.filter((t) => res.includes(t) || (prev?.resume.includes(t) ?? false)),
      weight_sync: synced || (prev?.weight_sync ?? false),
    });
  }
  let releaseS = 0;
  let resumeS = 0;
  let syncS = 0;
  let tail = 0;
  let moved = 0;
  // Untouched GPUs add nothing (their sums are 0).
  for (let b = 0; b < relLink.length; b++) {
    const resume = (resLink[b] ?? 0) + (resAlloc[b] ?? 0);
    releaseS = Math.max(releaseS, (relLink[b] ?? 0) + (relAlloc[b] ?? 0));
    resumeS = Math.max(resumeS, resume);
    syncS = Math.max(syncS, sync[b] ?? 0);
    tail = Math.max(tail, resume + (sync[b] ?? 0));
    moved = Math.max(moved, bytes[b] ?? 0);
  }
  return {
    from: (phases[pi] as PhaseDef).name,
    to: to.name,
    moves: [...moves.values()],
    bytes_moved: Math.round(moved),
    release_s: round3(releaseS),
    resume_s: round3(resumeS),
    weight_sync_s: round3(syncS),
    predicted_s: round3(releaseS + tail),
  };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** The prediction for one order of phases, or where it does not fit. */

export function predictSchedule(
  g: MemGroup,
  phases: readonly PhaseDef[],
  opts: { releaseAll?: boolean } = {},
): SchedulePrediction | Misfit {
  const { loads, misfit } = baseLoads(g, phases);
  if (misfit !== null) return misfit;
  // Releasing everything at every switch (what a coordinator without the memory model does) keeps nothing.
  const spans = opts.releaseAll ? new Map(g.items.map((it) => [it, [0, 0, 0]])) : keepSpans(g, phases, loads);
  const size = g.gpus.capacity.length;
  const scratch: SwitchScratch = {
    relLink: new Float64Array(size),
    relAlloc: new Float64Array(size),
    resLink: new Float64Array(size),
    resAlloc: new Float64Array(size),
    sync: new Float64Array(size),
    bytes: new Float64Array(size),
  };
  const switches = phases.length < 2 ? [] : phases.map((_, pi) => switchPlan(g, phases, pi, spans, scratch));
  const memory: PhaseMemory[] = phases.map((p, pi) => {
    const load = loads[pi] as Float64Array;
    let peak = 0;
    let at = 0;
    for (let b = 0; b < size; b++)
      if ((load[b] ?? 0) > peak) {
        peak = load[b] ?? 0;
        at = b;
      }
    const weights = new Set<string>();
    const tags: Record<string, ResidentTag[]> = {};
    for (const item of g.items) {
      if (residentIn(item, 0, pi, phases, spans)) weights.add(item.model);
      const on = RESUME_ORDER.filter((_, ti) => residentIn(item, ti, pi, phases, spans));
      if (on.length > 0)
        tags[item.model] = RESUME_ORDER.filter(
          (t) => on.includes(t) || (tags[item.model]?.includes(t) ?? false),
        );
    }
    return {
      name: p.name,
      residents: [...p.residents],
      resident_weights: [...weights],
      resident_tags: tags,
      peak_bytes: Math.round(peak),
      capacity_bytes: Math.round(g.gpus.capacity[at] ?? 0),
    };
  });
  return {
    phases: memory,
    switches,
    bubble_s: round3(switches.reduce((s, x) => s + x.predicted_s, 0)),
  };
}

export const isMisfit = (x: SchedulePrediction | Misfit): x is Misfit => 'gpu' in x;

/** The message of a phase whose residents do not fit a GPU: every part with its bytes. */
export function misfitMessage(g: MemGroup, phase: string, m: Misfit): string {
  return `on GPU ${g.gpus.label(m.gpu)} phase "${phase}" needs ${formatBytes(m.load)} (${Math.round(m.load)} bytes) of ${formatBytes(m.capacity)} (${Math.round(m.capacity)} bytes): ${m.parts.join(', ')}; lower a kv_cache_share, spread a model over more GPUs, or put a role in another phase`;
}

/** The memory view of one activation group of the plan (its pool's bundles, items and trainer). */
export function memGroup(
  config: UisConfig,
  plan: Pick<PlacementPlan, 'pools' | 'placements'>,
  group: ActivationGroupPlan,
): MemGroup | null {
  const pool = plan.pools[group.pool];
  if (pool === undefined) return null;
  const gpus = poolGpus(config, pool.bundles);
  const roles = new Set(group.phases.flatMap((p) => p.residents));
  const items = poolItems(
    config,
    plan.placements.filter((p) => p.pool === group.pool && (p.phase === null || roles.has(p.role))),
    gpus,
  );
  const trainer = new Float64Array(gpus.capacity.length);
  const share = config.training.memory_share;
  if (share !== undefined) {
    for (let b = 0; b < trainer.length; b++) trainer[b] = Math.floor(share * (gpus.capacity[b] ?? 0));
  } else {
    // Without a share the trainer takes what the always-resident slices leave.
    trainer.set(gpus.capacity);
    for (const it of items) {
      if (!it.always || it.bytes === null) continue;
      const sum = it.bytes.weights + it.bytes.kv_cache + it.bytes.cuda_graph;
      for (const b of it.gpus) trainer[b] = (trainer[b] ?? 0) - sum;
    }
    for (let b = 0; b < trainer.length; b++) trainer[b] = Math.max(0, trainer[b] ?? 0);
  }
  return { items, gpus, trainer };
}

/** Each bundle's GPU type and capacity (a node naming an unknown type is reported by the stage and counted as the
 * default type meanwhile). */
export function poolGpus(
  config: UisConfig,
  bundles: ReadonlyArray<{ node: string; gpu_id: number }>,
): MemGpus {
  const nodeType = nodeTypes(config);
  const types: GpuType[] = new Array(bundles.length);
  const capacity = new Float64Array(bundles.length);
  bundles.forEach((b, i) => {
    const t = nodeType.get(b.node) ?? H200;
    types[i] = t;
    capacity[i] = gbToBytes(t.memory_gb);
  });
  return { types, capacity, label: (b) => `${bundles[b]?.node}:${bundles[b]?.gpu_id}` };
}

/** Each node's GPU type, once per config (a plan asks for it per pool). */
const NODE_TYPES = new WeakMap<UisConfig, Map<string, GpuType>>();
function nodeTypes(config: UisConfig): Map<string, GpuType> {
  let map = NODE_TYPES.get(config);
  if (map === undefined) {
    const types: Record<string, GpuType> = { [DEFAULT_GPU_TYPE]: H200, ...config.cluster.gpu_types };
    map = new Map(config.cluster.nodes.map((n) => [n.name, types[n.gpu_type ?? DEFAULT_GPU_TYPE] ?? H200]));
    NODE_TYPES.set(config, map);
  }
  return map;
}

/** One item per placed engine group (placeholders hold no memory). */
export function poolItems(
  config: UisConfig,
  placements: PlacementPlan['placements'],
  gpus: MemGpus,
): MemItem[] {
  const items: MemItem[] = [];
  for (const p of placements) {
    if (p.worker_type === 'placeholder') continue;
    const models = config.roles[p.role]?.models ?? [];
    const mi = models.findIndex((m) => m.name === p.model);
    const model = models[mi];
    if (model === undefined) continue;
    // The KV share is of the engine's first GPU (an engine's GPUs are of one node, so of one type).
    const gpuBytes = gpus.capacity[p.bundle_indices[0] ?? 0] ?? gbToBytes(H200.memory_gb);
    const cpuBackup = model.engine_groups[p.group]?.server_args.enable_weights_cpu_backup === true;
    items.push({
      role: p.role,
      model: p.model,
      path: `roles.${p.role}.models[${mi}]`,
      gpus: p.bundle_indices,
      bytes: model.memory === undefined ? null : perGpuTagBytes(model.memory, p.gpus_per_engine, gpuBytes),
      always: p.phase === null,
      backup: cpuBackup || (p.offload && model.weight_source === 'static'),
      trained: model.weight_source !== 'static',
      syncCopy: model.weight_source === 'tensor' ? 'pinned' : 'pageable',
    });
  }
  return items;
}
