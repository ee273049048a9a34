import type { BarrierBoard, ControlPlane } from '@uis/control-plane';
import type { BatchInfo } from '@uis/manager';
import {
  BATCH_STAGE,
  type BatchView,
  type Clock,
  type ConsoleState,
  type ReplicaView,
  type Role,
  scorerOf,
  systemClock,
} from '@uis/spec';
import type { InferenceGateway } from '../gateway/inference-gateway.ts';
import type { ConsoleJournal } from './console-journal.ts';

export interface ConsoleStateSources {
  plane: ControlPlane;
  gateways: ReadonlyMap<Role, InferenceGateway>;
  journal: ConsoleJournal;
  barriers: BarrierBoard;
  clock?: Clock;
}

const MAX_BATCHES = 100;

export function batchView(b: BatchInfo): BatchView {
  const stage = BATCH_STAGE[b.state];
  const ended = b.state === 'committed' ? b.committed_at : b.state === 'failed' ? b.updated_at : null;
  return {
    id: b.id,
    kind: scorerOf(b.kind),
    state: stage,
    size: b.samples,
    created_at: b.created_at,
    // When its last run began: a finished batch shows how long it queued and how long it ran. A batch put back
    // in the queue waits again (its queued time runs on from its creation).
    started_at: stage === 'queued' ? null : b.started_at,
    ended_at: ended,
    // A failed batch's reason; a queued batch with a reason ran and was put back (engines unreachable, phase
    // interrupted): the operator sees why it waits for the next scorer phase. A committed batch's old reason is past.
    failure: b.state === 'failed' || b.state === 'sealed' ? b.reason : null,
  };
}

/** The whole service as the console sees it (`ConsoleStateSchema`), assembled from the live components. */
export function consoleState(src: ConsoleStateSources): ConsoleState {
  const { plane, gateways, journal, barriers } = src;
  const replicas: ReplicaView[] = [];
  const roles = [];
  const planned = new Map<string, Array<{ node: string; gpu_ids: number[] }>>();
  for (const p of plane.plan.placements)
    for (const r of p.replicas)
      planned.set(
        r.engine_id,
        r.nodes.map((n) => ({ node: n.node, gpu_ids: n.gpu_ids })),
      );
  for (const [role, manager] of plane.managers) {
    const snapshot = manager.registry.snapshot();
    roles.push(snapshot);
    const gateway = gateways.get(role);
    const state = manager.snapshot();
    for (const [model, m] of Object.entries(state.models)) {
      const published = new Map((snapshot.models[model]?.engines ?? []).map((e) => [e.engine_id, e]));
      for (const r of m.replicas) {
        const pub = published.get(r.engine_id);
        replicas.push({
          role,
          model,
          engine_id: r.engine_id,
          group: pub?.group ?? 0,
          worker_type: pub?.worker_type ?? 'regular',
          base_url: r.base_url,
          state: r.state,
          direct_eligible: pub?.direct_eligible ?? false,
          weight_version: r.weight_version,
          sglang_version: r.sglang_version,
          inflight: gateway?.inFlight.get(r.engine_id) ?? 0,
          // A model an SGLang router serves has no circuit of ours.
          circuit:
            gateway === undefined || (snapshot.models[model]?.router_url ?? null) !== null
              ? null
              : gateway.breakers.state(r.engine_id),
          generation: r.generation,
          planned: planned.get(r.engine_id) ?? [],
          // Where the launcher says the replica really runs (Ray: the nodes and GPUs Ray gave it). Launchers that only
          // know the plan report nothing: null is "unknown", not "same as planned".
          actual: plane.actualPlacement(r.engine_id),
          health: journal.healthOf(r.engine_id),
        });
      }
    }
  }
  const groups = plane.plan.activation_groups;
  const activation_groups = groups.map((g) => {
    const lease = plane.coordinator.lease(g.name);
    return {
      name: g.name,
      pool: g.pool,
      phases: g.phases,
      current_phase: lease.phase,
      lease_holder: lease.holder.length === 0 ? null : lease.holder.join(','),
      blocked: lease.status === 'blocked' ? { reason: lease.reason ?? 'blocked', at: lease.since } : null,
      barriers: barriers
        .list()
        .filter((b) => b.group === g.name || (b.group === null && groups.length === 1))
        .map((b) => ({ phase: b.phase, waiting: b.waiting, since: b.since })),
      transitions: journal.transitionsOf(g.name),
    };
  });
  const batches = plane.store.newest(MAX_BATCHES).map(batchView);
  return {
    generated_at: (src.clock ?? systemClock).now(),
    cluster: { nodes: plane.config.cluster.nodes.map((n) => ({ name: n.name, gpus: n.gpus })) },
    plan: plane.plan,
    roles,
    replicas,
    activation_groups,
    batches,
    events: journal.eventViews(),
  };
}
