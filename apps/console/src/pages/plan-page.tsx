import { useDeferredValue, useMemo, useState } from 'react';
import { GpuGrid } from '../components/gpu-grid.tsx';
import { MemoryCompare } from '../components/memory-compare.tsx';
import { buildGridModel } from '../lib/gpu-grid.ts';
import { planFromText } from '../lib/plan-input.ts';
import { PLAN_EXAMPLES } from './plan-examples.ts';

/** Paste a config (YAML/JSON) or Relax flags and see the placement or every violation; the planner runs in the
 * browser on each edit. */
export function PlanPage({
  initialText = '',
  onChange,
}: {
  initialText?: string;
  /** Lets the app keep the text while the operator visits other pages. */
  onChange?: (text: string) => void;
}) {
  const [text, setTextState] = useState(initialText);
  const setText = (value: string) => {
    setTextState(value);
    onChange?.(value);
  };
  const deferred = useDeferredValue(text);
  const result = useMemo(() => planFromText(deferred), [deferred]);
  const grid = useMemo(
    () =>
      result.kind === 'plan'
        ? buildGridModel({ nodes: result.config.cluster.nodes, plan: result.plan })
        : null,
    [result],
  );
  return (
    <div className="page plan-page" data-testid="page-plan">
      <div className="plan-input">
        <div className="toolbar">
          <label>
            Example{' '}
            <select
              value=""
              onChange={(e) => {
                const ex = PLAN_EXAMPLES.find((x) => x.name === e.target.value);
                if (ex) setText(ex.text);
              }}
              data-testid="plan-example"
            >
              <option value="">load an example…</option>
              {PLAN_EXAMPLES.map((ex) => (
                <option key={ex.name} value={ex.name}>
                  {ex.name}
                </option>
              ))}
            </select>
          </label>
          <span className="muted">
            {result.kind === 'empty'
              ? 'YAML or JSON config, or a Relax command line'
              : `read as ${result.source === 'relax-flags' ? 'Relax flags (unknown training flags ignored)' : 'a config file'}`}
          </span>
        </div>
        <textarea
          className="plan-text"
          spellCheck={false}
          aria-label="config or Relax flags"
          placeholder={
            'cluster:\n  nodes:\n    - { name: node-0, gpus: 8 }\nroles:\n  rollout: ...\n\nor: --resource \'{"actor": [1, 8], "rollout": [1, 8]}\' --colocate ...'
          }
          value={text}
          onChange={(e) => setText(e.target.value)}
          data-testid="plan-input"
        />
      </div>
      <div className="plan-output" data-testid="plan-output">
        {result.kind === 'empty' && (
          <p className="empty">
            Paste a config or pick an example: the placement or its violations appear here.
          </p>
        )}
        {result.kind === 'violations' && (
          <section className="card card-error" data-testid="plan-violations">
            <h2>
              {result.violations.length} violation{result.violations.length === 1 ? '' : 's'}: nothing would
              start
            </h2>
            <ul className="violations">
              {result.violations.map((v, i) => (
                <li key={`${v.code}-${v.path}-${i}`} data-testid="violation" data-code={v.code}>
                  <span className="badge badge-violation mono">{v.code}</span>{' '}
                  <span className="mono violation-path" data-testid="violation-path">
                    {v.path}
                  </span>
                  <div>{v.message}</div>
                </li>
              ))}
            </ul>
          </section>
        )}
        {result.kind === 'plan' && grid && (
          <section data-testid="plan-result">
            <p className="ok-text" data-testid="plan-ok">
              Valid {result.plan.mode.replace('_', ' ')} layout: {result.plan.placements.length} engine group
              {result.plan.placements.length === 1 ? '' : 's'},{' '}
              {result.plan.placements.reduce((n, p) => n + p.replicas.length, 0)} replicas on{' '}
              {result.config.cluster.nodes.length} nodes.
            </p>
            <GpuGrid grid={grid} />
            {result.plan.memory && <MemoryCompare memory={result.plan.memory} />}
          </section>
        )}
      </div>
    </div>
  );
}
