import type { ConsoleState } from '@uis/spec';
import { useMemo } from 'react';
import { GpuGrid } from '../components/gpu-grid.tsx';
import { buildGridModel } from '../lib/gpu-grid.ts';

export function ClusterPage({ state }: { state: ConsoleState }) {
  const grid = useMemo(
    () =>
      buildGridModel({
        nodes: state.cluster.nodes,
        plan: state.plan,
        replicas: state.replicas,
        activationGroups: state.activation_groups,
      }),
    [state],
  );
  const gpus = state.cluster.nodes.reduce((sum, n) => sum + n.gpus, 0);
  const ready = state.replicas.filter((r) => r.state === 'ready').length;
  const mismatched = grid.blocks.filter((b) => b.kind === 'replica' && b.mismatch).length;
  return (
    <div className="page" data-testid="page-cluster">
      <div className="summary">
        <div className="stat">
          <span className="stat-value">{state.cluster.nodes.length}</span> nodes
        </div>
        <div className="stat">
          <span className="stat-value" data-testid="gpu-count">
            {gpus}
          </span>{' '}
          GPUs
        </div>
        <div className="stat">
          <span className="stat-value">{state.plan.mode.replace('_', ' ')}</span> mode
        </div>
        <div className="stat">
          <span className="stat-value">
            {ready}/{state.replicas.length}
          </span>{' '}
          replicas ready
        </div>
        {state.activation_groups.map((g) => (
          <div className="stat" key={g.name}>
            <span className="stat-value" data-testid="cluster-current-phase">
              {g.current_phase ?? '—'}
            </span>{' '}
            phase of {g.name}
          </div>
        ))}
        <div className={`stat${mismatched > 0 ? ' stat-alert' : ''}`}>
          <span className="stat-value">{mismatched}</span> not where planned
        </div>
      </div>
      {state.plan.placements.length === 0 && (
        <p className="empty" data-testid="cluster-empty">
          Nothing is placed on this cluster: no role has GPUs here (external engines only, or no role
          configured).
        </p>
      )}
      <GpuGrid grid={grid} replicaHref={(id) => `#/replicas?q=${encodeURIComponent(id)}`} />
    </div>
  );
}
