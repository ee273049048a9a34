import type { ActivationGroupView, ConsoleState } from '@uis/spec';
import { useState } from 'react';
import { useTRPCClient } from '../api/trpc.ts';
import { useAdminAction } from '../components/admin-actions.tsx';
import { ActivationGroupPanel } from '../components/phase-timeline.tsx';

function nextPhase(group: ActivationGroupView): string | null {
  const names = group.phases.map((p) => p.name);
  if (names.length === 0) return null;
  const i = group.current_phase === null ? -1 : names.indexOf(group.current_phase);
  return names[(i + 1) % names.length] ?? null;
}

function AdvanceControl({ group }: { group: ActivationGroupView }) {
  const client = useTRPCClient();
  const request = useAdminAction();
  const [target, setTarget] = useState('');
  const next = nextPhase(group);
  const to = target || next;
  return (
    <div className="card-actions">
      <select
        aria-label={`target phase of ${group.name}`}
        value={target}
        onChange={(e) => setTarget(e.target.value)}
        data-testid="advance-target"
      >
        <option value="">next phase ({next ?? '—'})</option>
        {group.phases.map((p) => (
          <option key={p.name} value={p.name}>
            {p.name}
          </option>
        ))}
      </select>
      <button
        type="button"
        disabled={to === null}
        data-testid="advance-phase"
        onClick={() =>
          request({
            title: `Advance ${group.name} to ${to}`,
            description: `The lease of ${group.name} moves from ${group.current_phase ?? 'nobody'} to ${to}: the current residents drain and release their GPU memory before ${to} is onloaded.`,
            run: () =>
              client.advancePhase.mutate(target ? { group: group.name, to: target } : { group: group.name }),
          })
        }
      >
        Advance phase
      </button>
    </div>
  );
}

export function PhasesPage({ state }: { state: ConsoleState }) {
  if (state.activation_groups.length === 0) {
    return (
      <div className="page" data-testid="page-phases">
        <p className="empty">
          No activation group: every role keeps its GPUs ({state.plan.mode.replace('_', ' ')} mode), so there
          are no phases to serialize.
        </p>
      </div>
    );
  }
  return (
    <div className="page" data-testid="page-phases">
      {state.activation_groups.map((g) => (
        <ActivationGroupPanel
          key={g.name}
          group={g}
          now={state.generated_at}
          actions={<AdvanceControl group={g} />}
        />
      ))}
    </div>
  );
}
