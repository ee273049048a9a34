import {
  type ActivationGroupPlan,
  GPU_TIME_PARTS,
  type GpuSegment,
  type GpuStep,
  type GpuTimePart,
} from '@uis/spec';
import type { Interval } from './intervals.ts';

/** The audit records the GPU-time view reads (transition steps, phases entered, weight syncs). */
export interface TimelineEvent {
  kind: string;
  subject: string;
  at: number;
  duration_ms: number | null;
  data: Record<string, unknown>;
}

/** A trainer (or controller) waited at a barrier of `phase` from `from` to `to`; `group` null: the only group. */
export interface BarrierInterval extends Interval {
  group: string | null;
  phase: string;
}

export interface GpuTimeInput {
  group: ActivationGroupPlan;
  /** The group's bundle indices. */
  bundles: readonly number[];
  /** Bundles a resident role's engines sit on; a role with none (the trainer) holds every bundle of the group. */
  bundlesOf(role: string): readonly number[];
  events: readonly TimelineEvent[];
  barriers: readonly BarrierInterval[];
}

/** A group-wide stretch of time: which part it is, in which phase's hands. */
interface Piece extends Interval {
  part: GpuTimePart;
  phase: string | null;
}

const STEP_PART: Record<string, GpuTimePart> = { offload: 'release', onload: 'onload', tasks: 'batch_run' };

/** Pieces of `iv` outside and inside `holes` (holes clipped to it, overlaps merged). */
function carve(iv: Interval, holes: readonly Interval[]): { outside: Interval[]; inside: Interval[] } {
  const clipped = holes
    .map((h) => ({ from: Math.max(h.from, iv.from), to: Math.min(h.to, iv.to) }))
    .filter((h) => h.to > h.from)
    .sort((a, b) => a.from - b.from);
  const outside: Interval[] = [];
  const inside: Interval[] = [];
  let at = iv.from;
  for (const h of clipped) {
    if (h.to <= at) continue;
    const from = Math.max(h.from, at);
    if (from > at) outside.push({ from: at, to: from });
    inside.push({ from, to: h.to });
    at = h.to;
  }
  if (at < iv.to) outside.push({ from: at, to: iv.to });
  return { outside, inside };
}

/** The group's timeline: phases held (work), transition steps (release, onload, weight sync, batch run). */
function pieces(input: GpuTimeInput): Piece[] {
  const name = input.group.name;
  const syncs: Interval[] = [];
  const out: Piece[] = [];
  let held: { phase: string; since: number } | null = null;
  let lastPhase: string | null = null;
  const closeHeld = (at: number) => {
    if (held !== null && at > held.since)
      out.push({ from: held.since, to: at, part: 'work', phase: held.phase });
    held = null;
  };
  const events = [...input.events].sort((a, b) => a.at - b.at);
  for (const e of events) {
    if (e.kind === 'replica.weights_synced' && e.duration_ms !== null) {
      syncs.push({ from: e.at - e.duration_ms, to: e.at });
      continue;
    }
    if (e.subject !== name) continue;
    if (e.kind === 'phase.entered' && typeof e.data.phase === 'string') {
      held = { phase: e.data.phase, since: e.at };
      lastPhase = e.data.phase;
    } else if (e.kind === 'transition.started') {
      closeHeld(e.at);
    } else if (e.kind === 'transition.step' && e.duration_ms !== null) {
      const part = STEP_PART[String(e.data.step)];
      if (part === undefined) continue;
      const from = e.at - e.duration_ms;
      closeHeld(from);
      const target = typeof e.data.phase === 'string' ? e.data.phase : null;
      // Releasing is the leaving phase's; onloading and the batches are the incoming one's.
      const phase = part === 'release' ? lastPhase : target;
      if (part === 'onload') {
        const { outside, inside } = carve({ from, to: e.at }, syncs);
        for (const iv of outside) out.push({ ...iv, part: 'onload', phase });
        for (const iv of inside) out.push({ ...iv, part: 'weight_sync', phase });
      } else out.push({ from, to: e.at, part, phase });
      if (part !== 'release') lastPhase = target;
    }
  }
  // Barrier waits while another phase of this group held the GPUs: those GPUs waited on the barrier.
  const waits = input.barriers.filter((b) => b.group === null || b.group === name);
  const carved: Piece[] = [];
  for (const p of out) {
    if (p.part !== 'work') {
      carved.push(p);
      continue;
    }
    const { outside, inside } = carve(
      p,
      waits.filter((w) => w.phase !== p.phase),
    );
    for (const iv of outside) carved.push({ ...iv, part: 'work', phase: p.phase });
    for (const iv of inside) carved.push({ ...iv, part: 'barrier_wait', phase: p.phase });
  }
  return carved.sort((a, b) => a.from - b.from);
}

function zeros(): Record<GpuTimePart, number> {
  return Object.fromEntries(GPU_TIME_PARTS.map((p) => [p, 0])) as Record<GpuTimePart, number>;
}

/**
 * GPU time per RL step of an activation group, from the transition records: a step runs from one entry into the
 * group's first phase to the next. Each bundle's time is who held it (a phase's residents working, the trainer
 * training) or a bubble (release, onload, weight sync, barrier wait; gaps in a transition are `other`, and so are
 * bundles a phase leaves unused). Pure: the records and the plan in, the Gantt and the shares out.
 */
export function gpuTimeSteps(input: GpuTimeInput): GpuStep[] {
  const first = input.group.phases[0]?.name;
  if (first === undefined) return [];
  const residents = new Map(input.group.phases.map((p) => [p.name, p.residents]));
  const occupied = (phase: string | null): Set<number> => {
    if (phase === null) return new Set(input.bundles);
    const set = new Set<number>();
    for (const role of residents.get(phase) ?? []) {
      const own = input.bundlesOf(role);
      for (const b of own.length === 0 ? input.bundles : own) set.add(b);
    }
    return set;
  };
  const timeline = pieces(input);
  const starts = input.events
    .filter((e) => e.subject === input.group.name && e.kind === 'phase.entered' && e.data.phase === first)
    .map((e) => e.at)
    .sort((a, b) => a - b);
  const steps: GpuStep[] = [];
  for (let i = 0; i + 1 < starts.length; i++) {
    const from = starts[i] as number;
    const to = starts[i + 1] as number;
    if (to <= from) continue;
    const perBundle = new Map<number, GpuSegment[]>(input.bundles.map((b) => [b, []]));
    const seconds = zeros();
    const add = (bundle: number, seg: GpuSegment) => {
      const list = perBundle.get(bundle);
      if (list === undefined) return;
      const last = list[list.length - 1];
      if (last && last.to === seg.from && last.part === seg.part && last.holder === seg.holder)
        last.to = seg.to;
      else list.push(seg);
      seconds[seg.part] += (seg.to - seg.from) / 1000;
    };
    let at = from;
    const fill = (until: number) => {
      if (until <= at) return;
      for (const b of input.bundles)
        add(b, { from: at, to: until, part: 'other', phase: null, holder: 'idle' });
    };
    for (const p of timeline) {
      const a = Math.max(p.from, from);
      const z = Math.min(p.to, to);
      if (z <= a || a < at) continue;
      fill(a);
      const used = occupied(p.phase);
      const holder = p.phase === null ? 'idle' : (residents.get(p.phase) ?? []).join('+') || p.phase;
      for (const b of input.bundles)
        add(
          b,
          used.has(b)
            ? { from: a, to: z, part: p.part, phase: p.phase, holder }
            : { from: a, to: z, part: 'other', phase: p.phase, holder: 'idle' },
        );
      at = z;
    }
    fill(to);
    const total = (input.bundles.length * (to - from)) / 1000;
    const shares = zeros();
    for (const part of GPU_TIME_PARTS) shares[part] = total === 0 ? 0 : seconds[part] / total;
    steps.push({
      step: i + 1,
      from,
      to,
      gpu_seconds: seconds,
      shares,
      bundles: [...perBundle].map(([bundle, segments]) => ({ bundle, segments })),
    });
  }
  return steps;
}
