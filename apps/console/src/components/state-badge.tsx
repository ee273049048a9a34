import type { ReplicaState } from '@uis/spec';

export function StateBadge({ state }: { state: ReplicaState | string | null }) {
  if (state === null) return <span className="badge badge-unknown">unknown</span>;
  return (
    <span className={`badge badge-${state}`} data-testid="state-badge" data-state={state}>
      {state}
    </span>
  );
}

export function BoolMark({ value, yes = 'yes', no = 'no' }: { value: boolean; yes?: string; no?: string }) {
  return <span className={value ? 'mark-yes' : 'mark-no'}>{value ? yes : no}</span>;
}
