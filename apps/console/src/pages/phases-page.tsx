import type { ActivationGroupView, ConsoleState } from '@uis/spec';
import { useState } from 'react';
import { useTRPCClient } from '../api/trpc.ts';
import { readOnlyProps, useAdminAction, useReadOnly } from '../components/admin-actions.tsx';
import { ActivationGroupPanel } from '../components/phase-timeline.tsx';
import { advancedMessage, resolvedMessage } from '../lib/action-messages.ts';

function nextPhase(group: ActivationGroupView): string | null {
  const names = group.phases.map((p) => p.name);
  if (names.length === 0) return null;
  const i = group.current_phase === null ? -1 : names.indexOf(group.current_phase);
  return names[(i + 1) % names.length] ?? null;
}

function AdvanceControl({ group }: { group: ActivationGroupView }) {
  const client = useTRPCClient();
  const request = useAdminAction();
  const readOnly = useReadOnly();
  const [target, setTarget] = useState('');
  const next = nextPhase(group);
  const to = target || next;
  return (
    <div className="inline-actions">
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
        {...readOnlyProps(readOnly)}
        onClick={() =>
          request({
            title: `Advance ${group.name} to ${to}`,
            description: `The lease of ${group.name} moves from ${group.current_phase ?? 'nobody'} to ${to}: the current residents drain and release their GPU memory before ${to} is onloaded.`,
            run: async () =>
              advancedMessage(
                (
                  await client.advancePhase.mutate(
                    target ? { group: group.name, to: target } : { group: group.name },
                  )
                ).result,
              ),
          })
        }
      >
        Advance phase
      </button>
    </div>
  );
}

/** Unblocks a blocked lease at a phase the operator chose after checking the engines by hand. */
function ResolveControl({ group, blocked }: { group: ActivationGroupView; blocked: string }) {
  const client = useTRPCClient();
  const request = useAdminAction();
  const readOnly = useReadOnly();
  const [choice, setChoice] = useState<string | null>(null);
  const [note, setNote] = useState('');
  const phase = choice ?? group.current_phase ?? group.phases[0]?.name ?? null;
  const residents = group.phases.find((p) => p.name === phase)?.residents ?? [];
  return (
    <div className="inline-actions">
      <select
        aria-label={`phase to resolve the lease of ${group.name} at`}
        value={phase ?? ''}
        onChange={(e) => setChoice(e.target.value)}
        data-testid="resolve-phase"
      >
        {group.phases.map((p) => (
          <option key={p.name} value={p.name}>
            {p.name === group.current_phase ? `${p.name} (lease's phase)` : p.name}
          </option>
        ))}
      </select>
      <input
        type="text"
        placeholder="note (optional)"
        aria-label={`note on resolving the lease of ${group.name}`}
        value={note}
        onChange={(e) => setNote(e.target.value)}
        data-testid="resolve-note"
      />
      <button
        type="button"
        disabled={phase === null}
        data-testid="resolve-lease"
        {...readOnlyProps(readOnly)}
        onClick={() => {
          if (phase === null) return;
          const text = note.trim();
          request({
            title: `Resolve the lease of ${group.name} at ${phase}`,
            description: `The lease is blocked: ${blocked}. Resolving brings the GPUs of ${group.name} to phase ${phase}: every other role is drained and must report its memory released, then ${residents.join(', ') || 'no role'} onloads. The lease is held at ${phase} once the engines are there; if an engine cannot get there, the lease stays blocked and the answer names it.`,
            run: async () =>
              resolvedMessage(
                (
                  await client.resolveLease.mutate(
                    text === '' ? { group: group.name, phase } : { group: group.name, phase, note: text },
                  )
                ).result,
              ),
          });
        }}
      >
        Resolve lease
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
          actions={
            <div className="card-actions">
              <AdvanceControl group={g} />
              {g.blocked && <ResolveControl group={g} blocked={g.blocked.reason} />}
            </div>
          }
        />
      ))}
    </div>
  );
}
