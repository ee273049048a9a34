import type { GroupMemoryPlan, SchedulePrediction } from '@uis/spec';

const secs = (s: number) => `${s.toFixed(2)} s`;
const gb = (bytes: number) => `${(bytes / 1e9).toFixed(1)} GB`;

/** The switches of one order: what each releases and resumes, the bytes it moves and its predicted time. */
function Switches({ p, testId }: { p: SchedulePrediction; testId: string }) {
  return (
    <table className="table compact" data-testid={testId}>
      <thead>
        <tr>
          <th>switch</th>
          <th>releases</th>
          <th>resumes (in order)</th>
          <th>bytes moved</th>
          <th>predicted</th>
        </tr>
      </thead>
      <tbody>
        {p.switches.map((s) => (
          <tr key={`${s.from}-${s.to}`} data-testid="memory-switch">
            <td className="mono">
              {s.from} → {s.to}
            </td>
            <td>
              {s.moves
                .filter((m) => m.release.length > 0)
                .map((m) => `${m.model}: ${m.release.join('+')}`)
                .join(', ') || '–'}
            </td>
            <td>
              {s.moves
                .filter((m) => m.resume.length > 0 || m.weight_sync)
                .map((m) => `${m.model}: ${[...m.resume, ...(m.weight_sync ? ['sync'] : [])].join('+')}`)
                .join(', ') || '–'}
            </td>
            <td>{gb(s.bytes_moved)}</td>
            <td data-testid="memory-switch-s">{secs(s.predicted_s)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** `uis plan --compare` in the console: per activation group the configured order of the deferred phases beside
 * the planner's best, their predicted switch time per step, and releasing everything as the reference. */
export function MemoryCompare({ memory }: { memory: readonly GroupMemoryPlan[] }) {
  return (
    <>
      {memory.map((g) => {
        const c = g.configured;
        const o = g.optimized;
        const saved = c.bubble_s - o.bubble_s;
        const same = c.phases.map((p) => p.name).join() === o.phases.map((p) => p.name).join();
        return (
          <section className="card" key={g.group} data-testid="memory-compare" data-group={g.group}>
            <h2>
              Memory of activation group {g.group}
              {g.unsized.length > 0 ? ` (unsized: ${g.unsized.join(', ')})` : ''}
            </h2>
            <p data-testid="memory-verdict">
              Configured order: <strong data-testid="memory-configured-s">{secs(c.bubble_s)}</strong> of
              switches per step, optimized:{' '}
              <strong data-testid="memory-optimized-s">{secs(o.bubble_s)}</strong>, releasing everything:{' '}
              {secs(g.release_all.bubble_s)}.{' '}
              {saved > 0
                ? `Optimized saves ${secs(saved)} per step${g.order === 'optimized' ? ' (in use)' : '; set schedule.defer.order: optimized to use it'}.`
                : 'The configured order is already the best.'}
            </p>
            <h3>Configured: {c.phases.map((p) => p.name).join(' → ')}</h3>
            <Switches p={c} testId="memory-configured" />
            {!same && (
              <>
                <h3>Optimized: {o.phases.map((p) => p.name).join(' → ')}</h3>
                <Switches p={o} testId="memory-optimized" />
              </>
            )}
          </section>
        );
      })}
    </>
  );
}
