import { BatchStageSchema, type ConsoleState } from '@uis/spec';
import { formatClock, formatDuration } from '../lib/format.ts';

export function BatchesPage({ state }: { state: ConsoleState }) {
  const now = state.generated_at;
  const batches = [...state.batches].sort((a, b) => b.created_at - a.created_at);
  return (
    <div className="page" data-testid="page-batches">
      <div className="summary">
        {BatchStageSchema.options.map((s) => {
          const list = state.batches.filter((b) => b.state === s);
          return (
            <div className={`stat stat-batch-${s}`} key={s} data-testid="batch-count" data-state={s}>
              <span className="stat-value">{list.length}</span> {s}
              <span className="muted"> · {list.reduce((sum, b) => sum + b.size, 0)} samples</span>
            </div>
          );
        })}
      </div>
      {batches.length === 0 ? (
        <p className="empty" data-testid="batches-empty">
          No deferred batch yet. Rollout submits one when it stores samples for deferred GenRM scoring or
          teacher logprobs.
        </p>
      ) : (
        <table className="table" data-testid="batch-table">
          <thead>
            <tr>
              <th>batch</th>
              <th>kind</th>
              <th>state</th>
              <th className="num">size</th>
              <th>created</th>
              <th className="num">queued for</th>
              <th className="num">ran for</th>
              <th className="num">total</th>
              <th>failure</th>
            </tr>
          </thead>
          <tbody>
            {batches.map((b) => {
              // The gateway may not know when a finished batch started: then only the total is shown.
              const ended = b.ended_at !== null;
              const waited =
                b.started_at !== null ? b.started_at - b.created_at : ended ? null : now - b.created_at;
              const ran = b.started_at === null ? null : (b.ended_at ?? now) - b.started_at;
              const total = (b.ended_at ?? now) - b.created_at;
              const soFar = (value: number | null, running: boolean) =>
                `${formatDuration(value)}${value !== null && running ? ' so far' : ''}`;
              return (
                <tr key={b.id} data-testid="batch-row" data-state={b.state}>
                  <td className="mono">{b.id}</td>
                  <td>{b.kind}</td>
                  <td>
                    <span className={`badge badge-batch-${b.state}`}>{b.state}</span>
                  </td>
                  <td className="num mono">{b.size}</td>
                  <td className="mono">{formatClock(b.created_at)}</td>
                  <td className="num mono">{soFar(waited, b.started_at === null)}</td>
                  <td className="num mono">{soFar(ran, !ended)}</td>
                  <td className="num mono" data-testid="batch-total">
                    {soFar(total, !ended)}
                  </td>
                  <td className="error-text">{b.failure ?? ''}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}
