import type { ActivationGroupView } from '@uis/spec';
import type { ReactNode } from 'react';
import { roleColor } from '../lib/colors.ts';
import { formatClock, formatDuration } from '../lib/format.ts';

/** The newest transitions shown; older ones stay in the event log. */
export const MAX_TRANSITIONS = 30;

/** Transitions oldest first, with the duration shown for finished ones and the time so far for running ones
 * (measured against `now`, the state's generation time, so the view is a pure function of the state). */
export function orderedTransitions(group: ActivationGroupView, now: number) {
  return [...group.transitions]
    .sort((a, b) => a.started_at - b.started_at || a.id.localeCompare(b.id))
    .map((t) => ({
      ...t,
      shownMs:
        t.duration_ms ?? (t.ended_at !== null ? t.ended_at - t.started_at : Math.max(0, now - t.started_at)),
    }));
}

export function PhaseSchedule({ group }: { group: ActivationGroupView }) {
  return (
    <ol className="schedule" data-testid="phase-schedule">
      {group.phases.map((p) => {
        const current = p.name === group.current_phase;
        return (
          <li
            key={p.name}
            className={`phase-chip${current ? ' phase-chip-current' : ''}`}
            data-testid="phase-chip"
            data-phase={p.name}
            data-current={current ? 'true' : 'false'}
          >
            <span className="phase-name">{p.name}</span>
            <span className="phase-residents">
              {p.residents.map((r) => (
                <span key={r} className="resident" style={{ borderColor: roleColor(r) }}>
                  {r}
                </span>
              ))}
            </span>
            {current && <span className="pill pill-current">current</span>}
          </li>
        );
      })}
    </ol>
  );
}

export function PhaseTimeline({ group, now }: { group: ActivationGroupView; now: number }) {
  const rows = orderedTransitions(group, now);
  if (rows.length === 0) {
    return (
      <p className="empty" data-testid="timeline-empty">
        No phase transition yet.
      </p>
    );
  }
  const hidden = Math.max(0, rows.length - MAX_TRANSITIONS);
  const shown = rows.slice(hidden);
  const longest = Math.max(1, ...shown.map((r) => r.shownMs));
  return (
    <table className="table timeline" data-testid="phase-timeline">
      <thead>
        <tr>
          <th>started</th>
          <th>transition</th>
          <th>status</th>
          <th className="num">duration</th>
          <th className="bar-col" />
        </tr>
      </thead>
      <tbody>
        {shown.map((t) => (
          <tr key={t.id} data-testid="transition" data-status={t.status} data-to={t.to}>
            <td className="mono">{formatClock(t.started_at)}</td>
            <td>
              <span className="mono">{t.from ?? '∅'}</span> → <strong className="mono">{t.to}</strong>
            </td>
            <td>
              <span className={`badge badge-t-${t.status}`}>{t.status}</span>
              {t.error && (
                <div className="error-text" data-testid="transition-error">
                  {t.error}
                </div>
              )}
            </td>
            <td className="num mono" data-testid="transition-duration">
              {t.status === 'running' ? `${formatDuration(t.shownMs)} so far` : formatDuration(t.shownMs)}
            </td>
            <td className="bar-col">
              <div
                className={`duration-bar duration-${t.status}`}
                style={{ width: `${Math.max(2, (t.shownMs / longest) * 100)}%` }}
              />
            </td>
          </tr>
        ))}
      </tbody>
      {hidden > 0 && (
        <tfoot>
          <tr>
            <td colSpan={5} className="muted" data-testid="transitions-hidden">
              {hidden} older transition{hidden === 1 ? '' : 's'} not shown (see Events)
            </td>
          </tr>
        </tfoot>
      )}
    </table>
  );
}

export function ActivationGroupPanel({
  group,
  now,
  actions,
}: {
  group: ActivationGroupView;
  now: number;
  actions?: ReactNode;
}) {
  return (
    <section className="card" data-testid="activation-group" data-group={group.name}>
      <header className="card-head">
        <h2>
          Activation group <span className="mono">{group.name}</span>
          <span className="muted"> · pool {group.pool}</span>
        </h2>
        {actions}
      </header>
      <dl className="facts">
        <dt>current phase</dt>
        <dd data-testid="current-phase">{group.current_phase ?? '—'}</dd>
        <dt>lease holder</dt>
        <dd data-testid="lease-holder">{group.lease_holder ?? 'nobody'}</dd>
      </dl>
      <PhaseSchedule group={group} />
      {group.blocked && (
        <div className="alert alert-blocked" data-testid="blocked">
          <strong>Lease blocked</strong> since {formatClock(group.blocked.at)} (
          {formatDuration(Math.max(0, now - group.blocked.at))}):{' '}
          <span data-testid="blocked-reason">{group.blocked.reason}</span>
        </div>
      )}
      <h3>Barriers</h3>
      {group.barriers.length === 0 ? (
        <p className="empty">No barrier waiting.</p>
      ) : (
        <ul className="barriers">
          {group.barriers.map((b) => (
            <li key={`${b.phase}-${b.since}`} data-testid="barrier">
              phase <strong>{b.phase}</strong>: {b.waiting} waiting since {formatClock(b.since)} (
              {formatDuration(Math.max(0, now - b.since))})
            </li>
          ))}
        </ul>
      )}
      <h3>Transitions</h3>
      <PhaseTimeline group={group} now={now} />
    </section>
  );
}
