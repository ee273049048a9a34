import { useQuery } from '@tanstack/react-query';
import type { Role, ScaleOperation } from '@uis/spec';
import { useState } from 'react';
import { useTRPCClient } from '../api/trpc.ts';
import { readOnlyProps, useAdminAction, useReadOnly } from './admin-actions.tsx';
import { AutoscaleDecisions } from './autoscale-decisions.tsx';

const RUNNING = new Set(['PENDING', 'CREATING', 'CONNECTING', 'HEALTH_CHECKING', 'WEIGHT_SYNCING', 'READY']);

/** What an operator reads of a scale operation: its kind, target, state, engines and message. */
function describe(op: ScaleOperation): string {
  const target = op.num_replicas > 0 ? `to ${op.num_replicas}` : op.engine_urls.join(', ');
  return `${op.kind.replace('_', '-')} ${target}${op.dry_run ? ' (dry run)' : ''}`;
}

/** One scale operation: its state badge, what it does, its engines and message; Cancel while a scale-out runs. */
function ScaleOpRow({ op }: { op: ScaleOperation }) {
  const client = useTRPCClient();
  const request = useAdminAction();
  const readOnly = useReadOnly();
  return (
    <li data-testid="scale-op" data-status={op.status}>
      <span className={`badge scale-${op.status.toLowerCase()}`}>{op.status}</span> {describe(op)}
      {op.engine_ids.length > 0 ? <span className="mono"> {op.engine_ids.join(' ')}</span> : null}
      <span className="muted"> {op.error_message ?? op.message}</span>
      {op.kind === 'scale_out' && RUNNING.has(op.status) ? (
        <button
          type="button"
          data-testid="scale-cancel"
          {...readOnlyProps(readOnly)}
          onClick={() =>
            request({
              title: `Cancel scale-out ${op.request_id.slice(0, 8)}`,
              description: 'Every replica this scale-out added is stopped and removed.',
              run: async () =>
                `cancelled: ${(await client.cancelScaleOp.mutate({ request_id: op.request_id })).result.status}`,
            })
          }
        >
          Cancel
        </button>
      ) : null}
    </li>
  );
}

/**
 * A model's scale: a target count with Scale out / Scale in (force may take the plan's own replicas), and its
 * latest scale operations with their state as they move (PENDING -> ... -> ACTIVE / COMPLETED, FAILED,
 * CANCELLED); a running scale-out can be cancelled; and the autoscaler's latest decisions for it, if it has one.
 */
export function ScalePanel({ role, model, replicas }: { role: Role; model: string; replicas: number }) {
  const client = useTRPCClient();
  const request = useAdminAction();
  const readOnly = useReadOnly();
  const [target, setTarget] = useState(replicas);
  const [force, setForce] = useState(false);
  // Read only while the operator has the panel open: a closed panel costs the gateway nothing.
  const [open, setOpen] = useState(false);
  const ops = useQuery({
    queryKey: ['scale-ops', role, model],
    queryFn: () => client.listScaleOps.query({ role, model_name: model }),
    enabled: open,
    // An operation moves through its states in seconds: read again every second while the panel is open.
    refetchInterval: open ? 1000 : false,
  });
  const latest = (ops.data?.result.operations ?? []).slice(0, 3);
  const ask = (kind: 'scale_out' | 'scale_in') =>
    request({
      title: `${kind === 'scale_out' ? 'Scale out' : 'Scale in'} ${role}/${model} to ${target}`,
      description:
        kind === 'scale_out'
          ? `New replicas are placed on the bundles the plan reserved, pass a precheck (health, model path, a one-token generation, SGLang release) and are synced to the model's weight version before they join, all in one topology revision; any failure removes them all.`
          : `The newest replicas are drained (in-flight work finishes), stopped and removed${force ? '; forced: the plan’s own replicas may go too, without waiting' : '; the plan’s own replicas are kept'}.`,
      run: async () => {
        const r =
          kind === 'scale_out'
            ? await client.scaleOut.mutate({ role, model_name: model, num_replicas: target })
            : await client.scaleIn.mutate({ role, model_name: model, num_replicas: target, force });
        return `${describe(r.result)}: ${r.result.status} (${r.result.request_id.slice(0, 8)})`;
      },
    });
  return (
    <details
      className="scale-panel"
      data-testid="scale-panel"
      data-model={model}
      onToggle={(e) => setOpen((e.target as HTMLDetailsElement).open)}
    >
      <summary>scale</summary>
      <label>
        replicas{' '}
        <input
          type="number"
          min={1}
          value={target}
          data-testid="scale-target"
          onChange={(e) => setTarget(Number(e.target.value))}
          style={{ width: '4em' }}
        />
      </label>{' '}
      <button
        type="button"
        data-testid="scale-out"
        {...readOnlyProps(readOnly)}
        onClick={() => ask('scale_out')}
      >
        Scale out
      </button>{' '}
      <button
        type="button"
        data-testid="scale-in"
        {...readOnlyProps(readOnly)}
        onClick={() => ask('scale_in')}
      >
        Scale in
      </button>{' '}
      <label title="May remove the plan's own replicas, without waiting for in-flight work">
        <input type="checkbox" checked={force} onChange={(e) => setForce(e.target.checked)} /> force
      </label>
      <ul className="scale-ops">
        {latest.map((op) => (
          <ScaleOpRow key={op.request_id} op={op} />
        ))}
      </ul>
      <AutoscaleDecisions role={role} model={model} open={open} />
    </details>
  );
}
