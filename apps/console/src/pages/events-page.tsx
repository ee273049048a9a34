import type { ConsoleState } from '@uis/spec';
import { useMemo, useState } from 'react';
import { formatClock } from '../lib/format.ts';

export function EventsPage({ state }: { state: ConsoleState }) {
  const [text, setText] = useState('');
  const events = useMemo(() => {
    const needle = text.trim().toLowerCase();
    return [...state.events]
      .reverse()
      .filter(
        (e) =>
          needle === '' ||
          [e.kind, e.actor, e.subject, e.message].some((v) => v.toLowerCase().includes(needle)),
      );
  }, [state.events, text]);
  return (
    <div className="page" data-testid="page-events">
      <div className="toolbar">
        <input
          type="search"
          placeholder="filter: kind, actor, subject, message"
          aria-label="filter events"
          value={text}
          onChange={(e) => setText(e.target.value)}
          data-testid="event-filter"
        />
        <span className="muted">
          {events.length} of {state.events.length} events (newest first)
        </span>
      </div>
      {events.length === 0 ? (
        <p className="empty">
          {state.events.length === 0 ? 'No event yet.' : 'No event matches the filter.'}
        </p>
      ) : (
        <table className="table" data-testid="event-table">
          <thead>
            <tr>
              <th>time (UTC)</th>
              <th>kind</th>
              <th>actor</th>
              <th>subject</th>
              <th>message</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
              <tr
                key={e.id}
                data-testid="event-row"
                data-kind={e.kind}
                className={e.kind.startsWith('admin.') ? 'row-admin' : undefined}
              >
                <td className="mono">{formatClock(e.at)}</td>
                <td className="mono">{e.kind}</td>
                <td>{e.actor}</td>
                <td className="mono subject" title={e.subject}>
                  {e.subject}
                </td>
                <td className="message" title={e.message} data-testid="event-message">
                  {e.message}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
