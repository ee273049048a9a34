import type {
  ActivationGroupView,
  BatchView,
  CircuitState,
  ConsoleState,
  DiscoverySnapshot,
  EventView,
  GroupPlacement,
  PlacementPlan,
  ReplicaPlacement,
  ReplicaState,
  ReplicaView,
  Role,
} from '@uis/spec';

/** A hand-built console state shaped like `uis demo` (2 nodes x 8 GPUs, colocated defer: rollout -> GenRM score
 * -> teacher OPD -> train on one actor pool). The teacher is a TP16 engine spanning both nodes. Used by component
 * tests and by the mock gateway, so the console can be developed without the real gateway. */

export const DEMO_NODES = [
  { name: 'node-0', gpus: 8 },
  { name: 'node-1', gpus: 8 },
];

interface GroupSpec {
  role: Role;
  model: string;
  phase: string;
  gpusPerEngine: number;
}

export const DEMO_GROUPS: GroupSpec[] = [
  { role: 'rollout', model: 'policy', phase: 'rollout', gpusPerEngine: 4 },
  { role: 'genrm', model: 'judge', phase: 'score', gpusPerEngine: 8 },
  { role: 'teacher', model: 'math-teacher', phase: 'opd', gpusPerEngine: 16 },
];

export const DEMO_PHASES = [
  { name: 'rollout', residents: ['rollout'] },
  { name: 'score', residents: ['genrm'] },
  { name: 'opd', residents: ['teacher'] },
  { name: 'train', residents: ['train'] },
];

function replicasFor(spec: GroupSpec): ReplicaPlacement[] {
  const out: ReplicaPlacement[] = [];
  const total = 16;
  for (let start = 0, r = 0; start < total; start += spec.gpusPerEngine, r++) {
    const nodes = [];
    for (let g = start; g < start + spec.gpusPerEngine; g += 8) {
      const node = Math.floor(g / 8);
      const local = g % 8;
      const count = Math.min(8 - local, start + spec.gpusPerEngine - g);
      nodes.push({
        node: `node-${node}`,
        node_rank: nodes.length,
        bundle_indices: Array.from({ length: count }, (_, i) => g + i),
        gpu_ids: Array.from({ length: count }, (_, i) => local + i),
        base_gpu_id: local,
        gpu_id_step: 1,
      });
    }
    out.push({
      engine_id: `${spec.model}/${r}`,
      replica: r,
      group: 0,
      worker_type: 'regular',
      nnodes: nodes.length,
      nodes,
    });
  }
  return out;
}

export function demoPlan(): PlacementPlan {
  const all = Array.from({ length: 16 }, (_, i) => i);
  const placements: GroupPlacement[] = DEMO_GROUPS.map((spec) => ({
    role: spec.role,
    model: spec.model,
    group: 0,
    worker_type: 'regular',
    num_gpus: 16,
    gpus_per_engine: spec.gpusPerEngine,
    tp: spec.gpusPerEngine,
    pp: 1,
    dp: 1,
    ep: 1,
    bundle_start: 0,
    bundle_stop: 16,
    bundle_indices: all,
    gpu_ids: all,
    replicas: replicasFor(spec),
    nodes_per_engine: Math.max(1, spec.gpusPerEngine / 8),
    pool: 'actor',
    owner: 'controller',
    deleted_by: 'controller',
    activation_group: 'actor',
    phase: spec.phase,
    deferred: spec.phase !== 'rollout',
    ray_num_gpus: 0.2,
    offload: true,
  }));
  return {
    mode: 'colocated_defer',
    pools: {
      actor: {
        name: 'actor',
        size: 16,
        owner: 'controller',
        deleted_by: 'controller',
        pg_name: 'actor_pg',
        strategy: 'PACK',
        bundles: all.map((i) => ({
          index: i,
          node: `node-${Math.floor(i / 8)}`,
          gpu_id: i % 8,
          global_gpu: i,
        })),
      },
    },
    placements,
    activation_groups: [{ name: 'actor', pool: 'actor', phases: DEMO_PHASES }],
  };
}

export interface DemoOptions {
  /** Index into DEMO_PHASES of the phase holding the lease. */
  phase?: number;
  now?: number;
  /** Engine ids that run somewhere else than planned, with where they actually run. */
  moved?: Record<string, { node: string; gpu_ids: number[] }[]>;
  blocked?: string | null;
  /** Models drained by an operator (their replicas are sleeping whatever the phase). */
  drained?: string[];
  weightVersion?: number;
  restarted?: Record<string, number>;
  /** Replicas whose circuit at the gateway is not closed. */
  circuits?: Record<string, CircuitState>;
  events?: EventView[];
  batches?: BatchView[];
  transitions?: ActivationGroupView['transitions'];
}

function replicaState(spec: GroupSpec, phase: string, drained: boolean): ReplicaState {
  if (drained) return 'sleeping';
  return spec.phase === phase ? 'ready' : 'sleeping';
}

export function demoState(options: DemoOptions = {}): ConsoleState {
  const now = options.now ?? 1_764_000_000_000;
  const phaseIndex = options.phase ?? 0;
  const phase = DEMO_PHASES[phaseIndex % DEMO_PHASES.length]!.name;
  const plan = demoPlan();
  const drained = new Set(options.drained ?? []);
  const version = `v${options.weightVersion ?? 3}`;
  const replicas: ReplicaView[] = [];
  const roles: DiscoverySnapshot[] = [];
  DEMO_GROUPS.forEach((spec, gi) => {
    const group = plan.placements[gi]!;
    const engines = group.replicas.map((r, ri) => {
      const state = replicaState(spec, phase, drained.has(spec.model));
      const port = 30000 + gi * 100 + ri;
      const view: ReplicaView = {
        role: spec.role,
        model: spec.model,
        engine_id: r.engine_id,
        group: 0,
        worker_type: 'regular',
        base_url: `http://127.0.0.1:${port}`,
        state,
        direct_eligible: state === 'ready',
        weight_version: spec.role === 'rollout' ? version : 'v0',
        sglang_version: state === 'starting' ? null : '0.5.17',
        inflight: state === 'ready' ? ((ri * 7 + phaseIndex * 3) % 11) + 1 : 0,
        circuit: options.circuits?.[r.engine_id] ?? 'closed',
        generation: options.restarted?.[r.engine_id] ?? 0,
        planned: r.nodes.map((n) => ({ node: n.node, gpu_ids: n.gpu_ids })),
        actual: options.moved?.[r.engine_id] ?? r.nodes.map((n) => ({ node: n.node, gpu_ids: n.gpu_ids })),
        health: Array.from({ length: 12 }, (_, k) => ({
          at: now - (12 - k) * 5000,
          ok: !(k === 7 && ri === 1),
          latency_ms: k === 7 && ri === 1 ? null : 2 + ((k * 13 + ri * 5) % 9),
          error: k === 7 && ri === 1 ? 'connect ECONNREFUSED' : null,
        })),
      };
      replicas.push(view);
      return view;
    });
    const modelState = engines.some((e) => e.state === 'ready') ? 'ready' : 'sleeping';
    roles.push({
      schema_version: 2,
      role: spec.role,
      topology_revision: 10 + phaseIndex,
      registry_epoch: 'epoch-demo',
      phase,
      models: {
        [spec.model]: {
          state: modelState,
          router_url: null,
          weight_version: spec.role === 'rollout' ? version : 'v0',
          engines: engines.map((e) => ({
            engine_id: e.engine_id,
            base_url: e.base_url,
            state: e.state,
            direct_eligible: e.direct_eligible,
            weight_version: e.weight_version,
            group: e.group,
            worker_type: e.worker_type,
            generation: e.generation,
            ...(e.sglang_version === null ? {} : { sglang_version: e.sglang_version }),
            circuit: e.circuit ?? 'closed',
          })),
        },
      },
    });
  });
  const transitions = options.transitions ?? [
    {
      id: 't1',
      from: 'train',
      to: 'rollout',
      started_at: now - 60_000,
      ended_at: now - 57_600,
      duration_ms: 2400,
      status: 'ok',
      error: null,
    },
    {
      id: 't2',
      from: 'rollout',
      to: 'score',
      started_at: now - 40_000,
      ended_at: now - 38_750,
      duration_ms: 1250,
      status: 'ok',
      error: null,
    },
    {
      id: 't3',
      from: 'score',
      to: 'opd',
      started_at: now - 20_000,
      ended_at: null,
      duration_ms: null,
      status: 'failed',
      error: 'judge/1 did not report memory released',
    },
  ];
  return {
    generated_at: now,
    cluster: { nodes: DEMO_NODES },
    plan,
    roles,
    replicas,
    activation_groups: [
      {
        name: 'actor',
        pool: 'actor',
        phases: DEMO_PHASES,
        current_phase: phase,
        lease_holder: phase,
        blocked: options.blocked ? { reason: options.blocked, at: now - 5000 } : null,
        barriers: phase === 'train' ? [] : [{ phase: 'train', waiting: 1, since: now - 8000 }],
        transitions,
      },
    ],
    batches: options.batches ?? [
      {
        id: 'b-1',
        kind: 'genrm',
        state: 'committed',
        size: 256,
        created_at: now - 50_000,
        started_at: now - 40_000,
        ended_at: now - 30_000,
        failure: null,
      },
      {
        id: 'b-2',
        kind: 'teacher',
        state: 'failed',
        size: 128,
        created_at: now - 30_000,
        started_at: now - 20_000,
        ended_at: now - 19_000,
        failure: 'teacher engine timeout after 30 s',
      },
      {
        id: 'b-3',
        kind: 'genrm',
        state: 'scoring',
        size: 256,
        created_at: now - 9000,
        started_at: now - 4000,
        ended_at: null,
        failure: null,
      },
      {
        id: 'b-4',
        kind: 'genrm',
        state: 'queued',
        size: 64,
        created_at: now - 1000,
        started_at: null,
        ended_at: null,
        failure: null,
      },
    ],
    events: options.events ?? [
      {
        id: 1,
        at: now - 60_000,
        kind: 'phase.transition',
        actor: 'system',
        subject: 'actor',
        message: 'train -> rollout',
      },
      {
        id: 2,
        at: now - 40_000,
        kind: 'phase.transition',
        actor: 'driver',
        subject: 'actor',
        message: 'rollout -> score',
      },
      {
        id: 3,
        at: now - 10_000,
        kind: 'admin.drain',
        actor: 'console',
        subject: 'rollout/policy',
        message: 'drain requested',
      },
    ],
  };
}
