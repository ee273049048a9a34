import { useQuery } from '@tanstack/react-query';
import type { AppOutput } from '../api/app-router.ts';
import { useTRPC } from '../api/trpc.ts';
import { formatClock } from '../lib/format.ts';

export type WeightSwitch = AppOutput<'weightSwitches'>['result']['switches'][number];

/** Switches shown per model, newest first. */
const SHOWN = 20;

/** A model's weight timeline: one row per switch (newest first) with its mode, versions, duration and outcome,
 * then the version each replica reported after it (a quarantined replica marked). */
export function WeightSwitchTimeline({ switches }: { switches: readonly WeightSwitch[] }) {
  if (switches.length === 0) return null;
  const rows = [...switches].reverse().slice(0, SHOWN);
  const engines = [...new Set(rows.flatMap((s) => s.engines.map((e) => e.engine_id)))].sort((a, b) =>
    a.localeCompare(b, undefined, { numeric: true }),
  );
  return (
    <details className="switch-timeline" data-testid="switch-timeline" open>
      <summary>
        weight switches ({switches.length}
        {switches.length > SHOWN ? `, newest ${SHOWN} shown` : ''})
      </summary>
      <table className="table">
        <thead>
          <tr>
            <th>time (UTC)</th>
            <th>mode</th>
            <th>versions</th>
            <th className="num">duration ms</th>
            <th>outcome</th>
            {engines.map((id) => (
              <th key={id} className="mono">
                {id}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((s) => (
            <tr key={s.id} data-testid="switch-row" data-outcome={s.outcome} data-mode={s.mode}>
              <td className="mono">{formatClock(s.started_at)}</td>
              <td>{s.mode}</td>
              <td className="mono">
                {s.from_version ?? '—'} → {s.to_version}
              </td>
              <td className="num">{Math.round(s.duration_ms)}</td>
              <td className={s.outcome === 'switched' ? undefined : 'warn'} title={failures(s)}>
                {s.outcome}
              </td>
              {engines.map((id) => {
                const e = s.engines.find((x) => x.engine_id === id);
                return (
                  <td
                    key={id}
                    className={`mono${e?.quarantined ? ' warn' : ''}`}
                    data-testid="switch-cell"
                    data-engine-id={id}
                    title={e?.error}
                  >
                    {e === undefined
                      ? ''
                      : `${e.weight_version ?? '?'}${e.quarantined ? ' (quarantined)' : ''}`}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}

/** What went wrong in a switch, for its outcome's tooltip. */
function failures(s: WeightSwitch): string | undefined {
  const failed = s.engines.filter((e) => e.error !== undefined);
  return failed.length === 0 ? undefined : failed.map((e) => `${e.engine_id}: ${e.error}`).join('\n');
}

/** The timeline of one model, read from the control plane (and read again as switches happen). */
export function ModelSwitches({ role, model }: { role: string; model: string }) {
  const trpc = useTRPC();
  const query = useQuery({
    ...trpc.weightSwitches.queryOptions({ role, model }),
    refetchInterval: 5_000,
    retry: false,
  });
  return <WeightSwitchTimeline switches={query.data?.result.switches ?? []} />;
}
