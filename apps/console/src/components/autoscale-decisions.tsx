import { useQuery } from '@tanstack/react-query';
import type { Role } from '@uis/spec';
import { useTRPCClient } from '../api/trpc.ts';
import { formatClock } from '../lib/format.ts';

/** What the gateway records of one decision (`autoscale.decision` audit events). */
interface Decision {
  action: 'scale_out' | 'scale_in' | 'none';
  from: number;
  target: number;
  reason: string;
}

/**
 * The built-in autoscaler's latest decisions for a model, newest first: when, what (from -> to replicas) and why.
 * Shown only for a model the autoscaler has decided about (one with an `autoscale` block).
 */
export function AutoscaleDecisions({ role, model, open }: { role: Role; model: string; open: boolean }) {
  const client = useTRPCClient();
  const events = useQuery({
    queryKey: ['autoscale', role, model],
    // Oldest first, and only decisions that acted or changed their reason are recorded: few rows.
    queryFn: () =>
      client.listEvents.query({ kind: 'autoscale.decision', subject: `${role}/${model}`, limit: 1000 }),
    enabled: open,
    refetchInterval: open ? 1000 : false,
  });
  const rows = (events.data?.result.events ?? []).slice(-6).reverse();
  if (rows.length === 0) return null;
  return (
    <div className="autoscale" data-testid="autoscale-decisions">
      <span className="muted">autoscaler</span>
      <ul>
        {rows.map((e) => {
          const d = e.data as unknown as Decision;
          return (
            <li key={e.seq} data-testid="autoscale-decision" data-action={d.action}>
              <span className="mono">{formatClock(e.at)}</span>{' '}
              <span className={`badge autoscale-${d.action}`}>{d.action.replace('_', '-')}</span>{' '}
              {d.action === 'none' ? `${d.from} replicas` : `${d.from} -> ${d.target} replicas`}
              <span className="muted"> {d.reason}</span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}
