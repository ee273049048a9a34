import type {
  ActivationGroupView,
  GpuRef,
  PlacementPlan,
  ReplicaState,
  ReplicaView,
  WorkerType,
} from '@uis/spec';
import { modelIndexer } from './colors.ts';

/** The GPU grid as data: lanes (one per phase of each activation group, plus one for always-resident roles),
 * and rectangular blocks (a replica, a placeholder reservation, or the trainer) placed on node rows x local GPU
 * columns. A multi-node engine that takes whole consecutive nodes is ONE block spanning those node rows. Pure:
 * components only draw it, tests check it. */

export interface GridNode {
  name: string;
  gpus: number;
}

export interface GridLane {
  key: string;
  group: string | null;
  phase: string | null;
  residents: string[];
  current: boolean;
}

export interface Rect {
  nodeStart: number;
  nodeEnd: number;
  gpuStart: number;
  gpuEnd: number;
}

export interface GridBlock extends Rect {
  key: string;
  lane: number;
  kind: 'replica' | 'placeholder' | 'train' | 'planned';
  role: string;
  model: string | null;
  modelIndex: number;
  engineId: string | null;
  workerType: WorkerType | null;
  state: ReplicaState | null;
  directEligible: boolean | null;
  weightVersion: string | null;
  inflight: number | null;
  /** The replica runs somewhere else than the plan put it. */
  mismatch: boolean;
  /** 1-based part number when a replica's GPUs are not one rectangle (never for planner-valid layouts). */
  part: number | null;
  /** Parallelism of the engine, e.g. `TP8` or `TP4 · PP2` (null for the trainer). */
  parallel: string | null;
}

export interface GpuOwner {
  lane: number;
  role: string;
  model: string | null;
  modelIndex: number;
  current: boolean;
}

export interface GridModel {
  /** Drawn from live replicas (states, current phase), or from a plan alone (the Plan page). */
  live: boolean;
  nodes: GridNode[];
  maxGpus: number;
  lanes: GridLane[];
  blocks: GridBlock[];
  /** Owners of each physical GPU (`node/gpu`), one per lane that uses it. */
  owners: Map<string, GpuOwner[]>;
  /** Replicas in the state whose location cannot be drawn (not planned, unknown node). */
  unplaced: string[];
}

export interface GridInput {
  nodes: GridNode[];
  plan: PlacementPlan;
  replicas?: ReplicaView[];
  activationGroups?: ActivationGroupView[];
}

export const gpuKey = (node: string, gpu: number): string => `${node}/${gpu}`;

/** Splits cells into rectangles: contiguous GPU runs per node, merged across consecutive nodes with equal runs. */
export function rectangles(cells: ReadonlyArray<{ node: number; gpu: number }>): Rect[] {
  const byNode = new Map<number, number[]>();
  for (const c of cells) {
    const list = byNode.get(c.node) ?? [];
    list.push(c.gpu);
    byNode.set(c.node, list);
  }
  const runs: Rect[] = [];
  for (const node of [...byNode.keys()].sort((a, b) => a - b)) {
    const gpus = [...new Set(byNode.get(node))].sort((a, b) => a - b);
    let start = gpus[0]!;
    let prev = start;
    for (const g of gpus.slice(1)) {
      if (g !== prev + 1) {
        runs.push({ nodeStart: node, nodeEnd: node, gpuStart: start, gpuEnd: prev });
        start = g;
      }
      prev = g;
    }
    runs.push({ nodeStart: node, nodeEnd: node, gpuStart: start, gpuEnd: prev });
  }
  const merged: Rect[] = [];
  for (const run of runs) {
    const open = merged.find(
      (m) => m.nodeEnd === run.nodeStart - 1 && m.gpuStart === run.gpuStart && m.gpuEnd === run.gpuEnd,
    );
    if (open) open.nodeEnd = run.nodeEnd;
    else merged.push({ ...run });
  }
  return merged;
}

function refsKey(refs: ReadonlyArray<GpuRef>): string {
  return refs
    .flatMap((r) => r.gpu_ids.map((g) => gpuKey(r.node, g)))
    .sort()
    .join(',');
}

/** The live fields of a block no replica stands behind (placeholder slots, the trainer). */
const NOT_LIVE = {
  engineId: null,
  state: null,
  directEligible: null,
  weightVersion: null,
  inflight: null,
  mismatch: false,
} as const;

/** The block fields of the trainer's GPUs (no model, no replica). */
const TRAINER = {
  kind: 'train',
  role: 'train',
  model: null,
  modelIndex: 0,
  workerType: null,
  parallel: null,
} as const;

/** `TP4 · PP2`: the parallelism of an engine group (dimensions of 1 left out but TP). */
function parallelLabel(group: { tp: number; pp: number; dp: number; ep: number }): string {
  return [
    `TP${group.tp}`,
    group.pp > 1 ? `PP${group.pp}` : '',
    group.dp > 1 ? `DP${group.dp}` : '',
    group.ep > 1 ? `EP${group.ep}` : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

/** Each phase the trainer is resident in, with the whole pool of its activation group. */
function trainerHoldings(plan: GridInput['plan']): Array<{ group: string; phase: string; refs: GpuRef[] }> {
  return plan.activation_groups.flatMap((ag) => {
    const pool = plan.pools[ag.pool];
    if (!pool) return [];
    const refs = pool.bundles.map((b) => ({ node: b.node, gpu_ids: [b.gpu_id] }));
    return ag.phases
      .filter((ph) => ph.residents.includes('train'))
      .map((ph) => ({ group: ag.name, phase: ph.name, refs }));
  });
}

/** Who holds each GPU, per lane (planned blocks aside), lanes in order. */
function gpuOwners(
  blocks: readonly GridBlock[],
  nodes: GridInput['nodes'],
  lanes: readonly GridLane[],
): Map<string, GpuOwner[]> {
  const owners = new Map<string, GpuOwner[]>();
  for (const b of blocks) {
    if (b.kind === 'planned') continue;
    for (let n = b.nodeStart; n <= b.nodeEnd; n++) {
      for (let g = b.gpuStart; g <= b.gpuEnd; g++) {
        const key = gpuKey(nodes[n]!.name, g);
        const list = owners.get(key) ?? [];
        if (!list.some((o) => o.lane === b.lane && o.role === b.role && o.model === b.model)) {
          list.push({
            lane: b.lane,
            role: b.role,
            model: b.model,
            modelIndex: b.modelIndex,
            current: lanes[b.lane]!.current,
          });
        }
        owners.set(key, list);
      }
    }
  }
  for (const list of owners.values()) list.sort((a, b) => a.lane - b.lane);

  return owners;
}

export function buildGridModel(input: GridInput): GridModel {
  const { nodes, plan } = input;
  const nodeIndex = new Map(nodes.map((n, i) => [n.name, i]));
  const maxGpus = Math.max(0, ...nodes.map((n) => n.gpus));
  const liveByEngine = new Map((input.replicas ?? []).map((r) => [r.engine_id, r]));
  const currentByGroup = new Map((input.activationGroups ?? []).map((g) => [g.name, g.current_phase]));
  const indexOf = modelIndexer();

  const lanes: GridLane[] = [];
  const laneOf = (group: string | null, phase: string | null, residents: string[] = []): number => {
    const key = group === null ? 'resident' : `${group}:${phase ?? ''}`;
    const found = lanes.findIndex((l) => l.key === key);
    if (found >= 0) return found;
    lanes.push({
      key,
      group,
      phase,
      residents,
      current: group !== null && currentByGroup.get(group) === phase && phase !== null,
    });
    return lanes.length - 1;
  };
  if (plan.placements.some((p) => p.activation_group === null)) laneOf(null, null);
  for (const ag of plan.activation_groups) for (const ph of ag.phases) laneOf(ag.name, ph.name, ph.residents);

  const blocks: GridBlock[] = [];
  const unplaced: string[] = [];
  const toCells = (refs: ReadonlyArray<GpuRef>): Array<{ node: number; gpu: number }> | null => {
    const cells: Array<{ node: number; gpu: number }> = [];
    for (const r of refs) {
      const n = nodeIndex.get(r.node);
      if (n === undefined) return null;
      for (const g of r.gpu_ids) cells.push({ node: n, gpu: g });
    }
    return cells.length > 0 ? cells : null;
  };
  const push = (
    base: Omit<GridBlock, keyof Rect | 'part' | 'key'>,
    cells: Array<{ node: number; gpu: number }>,
  ) => {
    const rects = rectangles(cells);
    rects.forEach((rect, i) => {
      blocks.push({
        ...base,
        ...rect,
        part: rects.length > 1 ? i + 1 : null,
        key: `${base.kind}:${base.lane}:${base.engineId ?? base.model ?? base.role}:${i}`,
      });
    });
  };

  for (const group of plan.placements) {
    const lane = laneOf(group.activation_group, group.phase);
    const modelIndex = indexOf(group.role, group.model);
    const base = {
      lane,
      role: group.role,
      model: group.model,
      modelIndex,
      workerType: group.worker_type,
      parallel: parallelLabel(group),
    };
    if (group.replicas.length === 0) {
      const pool = plan.pools[group.pool];
      const refs: GpuRef[] = [];
      for (const index of group.bundle_indices) {
        const b = pool?.bundles.find((x) => x.index === index);
        if (b) refs.push({ node: b.node, gpu_ids: [b.gpu_id] });
      }
      const cells = toCells(refs);
      if (cells) {
        push(
          {
            ...base,
            ...NOT_LIVE,
            kind: 'placeholder',
          },
          cells,
        );
      }
      continue;
    }
    for (const replica of group.replicas) {
      const planned: GpuRef[] = replica.nodes.map((n) => ({ node: n.node, gpu_ids: n.gpu_ids }));
      const live = liveByEngine.get(replica.engine_id);
      liveByEngine.delete(replica.engine_id);
      const actual = live?.actual ?? null;
      const mismatch = actual !== null && actual.length > 0 && refsKey(actual) !== refsKey(planned);
      const where = mismatch && actual ? actual : planned;
      const cells = toCells(where);
      if (!cells) {
        unplaced.push(replica.engine_id);
        continue;
      }
      const liveFields = {
        engineId: replica.engine_id,
        state: live?.state ?? null,
        directEligible: live?.direct_eligible ?? null,
        weightVersion: live?.weight_version ?? null,
        inflight: live?.inflight ?? null,
      };
      push({ ...base, ...liveFields, kind: 'replica', mismatch }, cells);
      const plannedCells = mismatch ? toCells(planned) : null;
      if (plannedCells) push({ ...base, ...liveFields, kind: 'planned', mismatch: true }, plannedCells);
    }
  }

  // The trainer holds the whole pool of its activation group in the phases it is resident in.
  for (const { group, phase, refs } of trainerHoldings(plan)) {
    const cells = toCells(refs);
    if (cells) push({ ...TRAINER, lane: laneOf(group, phase), ...NOT_LIVE }, cells);
  }

  for (const rest of liveByEngine.values()) unplaced.push(rest.engine_id);

  const owners = gpuOwners(blocks, nodes, lanes);
  return { live: input.replicas !== undefined, nodes, maxGpus, lanes, blocks, owners, unplaced };
}
