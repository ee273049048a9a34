import {
  GPU_TIME_PARTS,
  type GpuStep,
  type GpuTimePart,
  type GpuTimePrediction,
  type GpuTimeReport,
} from '@uis/spec';
import { useState } from 'react';
import { roleColor } from '../lib/colors.ts';
import { useGpuTime } from './use-gpu-time.ts';

const PART_COLORS: Record<GpuTimePart, string> = {
  work: '#339af0',
  batch_run: '#9775fa',
  release: '#fa5252',
  onload: '#fd7e14',
  weight_sync: '#fab005',
  barrier_wait: '#868e96',
  other: '#e9ecef',
};
const BUBBLES: GpuTimePart[] = ['release', 'onload', 'weight_sync', 'barrier_wait'];

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

function segmentColor(part: GpuTimePart, holder: string): string {
  if (part === 'work') return roleColor(holder.split('+')[0] ?? holder);
  return PART_COLORS[part];
}

function Legend({ holders }: { holders: string[] }) {
  return (
    <div className="legend" data-testid="gpu-legend">
      {holders.map((h) => (
        <span key={h}>
          <i style={{ background: roleColor(h.split('+')[0] ?? h) }} /> {h} working
        </span>
      ))}
      {GPU_TIME_PARTS.filter((p) => p !== 'work').map((p) => (
        <span key={p}>
          <i style={{ background: PART_COLORS[p] }} /> {p.replace('_', ' ')}
        </span>
      ))}
    </div>
  );
}

function Gantt({ step }: { step: GpuStep }) {
  const span = step.to - step.from;
  return (
    <div className="gantt" data-testid="gantt">
      {step.bundles.map((b) => (
        <div className="gantt-row" key={b.bundle} data-testid={`gantt-bundle-${b.bundle}`}>
          <span className="gantt-label">GPU {b.bundle}</span>
          <div className="gantt-track">
            {b.segments.map((s) => (
              <span
                key={`${s.from}-${s.part}`}
                className={`gantt-seg part-${s.part}`}
                title={`${s.holder} ${s.part} ${((s.to - s.from) / 1000).toFixed(2)} s`}
                style={{
                  left: pct((s.from - step.from) / span),
                  width: pct((s.to - s.from) / span),
                  background: segmentColor(s.part, s.holder),
                }}
              />
            ))}
          </div>
        </div>
      ))}
    </div>
  );
}

function Trend({
  steps,
  selected,
  onSelect,
}: {
  steps: GpuStep[];
  selected: number;
  onSelect: (n: number) => void;
}) {
  return (
    <div
      className="trend"
      data-testid="gpu-trend"
      data-steps={steps.length}
      data-last-step={steps.at(-1)?.step ?? 0}
    >
      {steps.map((s) => (
        <button
          type="button"
          key={s.step}
          className={`trend-col${s.step === selected ? ' selected' : ''}`}
          onClick={() => onSelect(s.step)}
          title={`step ${s.step}: bubbles ${pct(BUBBLES.reduce((n, p) => n + (s.shares[p] ?? 0), 0))}`}
        >
          {GPU_TIME_PARTS.map((p) => (
            <span key={p} style={{ height: pct(s.shares[p] ?? 0), background: PART_COLORS[p] }} />
          ))}
        </button>
      ))}
    </div>
  );
}

const secs = (x: number) => `${x.toFixed(2)} s`;

/** The memory model's prediction beside the step's measured switch time, and what each decision saved. */
function Predicted({ predicted, step }: { predicted: GpuTimePrediction; step: GpuStep }) {
  // Switches hold every GPU of the group: the wall-clock switch time is the switch GPU-seconds over the GPUs.
  const gpus = Math.max(1, step.bundles.length);
  const measured =
    ((step.gpu_seconds.release ?? 0) + (step.gpu_seconds.onload ?? 0) + (step.gpu_seconds.weight_sync ?? 0)) /
    gpus;
  const order = predicted.configured_bubble_s - predicted.bubble_s;
  return (
    <div data-testid="gpu-predicted">
      <h3>Switch time per step: predicted vs measured</h3>
      <p>
        predicted <strong data-testid="gpu-predicted-s">{secs(predicted.bubble_s)}</strong>, measured{' '}
        <strong data-testid="gpu-measured-s">{secs(measured)}</strong>; releasing everything at every switch:{' '}
        {secs(predicted.release_all_bubble_s)} predicted, so keeping what fits saves{' '}
        <strong data-testid="gpu-saved-s">
          {secs(predicted.release_all_bubble_s - predicted.configured_bubble_s)}
        </strong>
        {predicted.order === 'optimized' && order > 0 ? `, and the optimized order ${secs(order)} more` : ''}.
      </p>
      <table className="table compact" data-testid="gpu-decisions">
        <thead>
          <tr>
            <th>switch</th>
            <th>predicted</th>
            <th>releasing everything</th>
            <th>saved by keeping</th>
          </tr>
        </thead>
        <tbody>
          {predicted.switches.map((s) => (
            <tr key={`${s.from}-${s.to}`} data-switch={`${s.from}->${s.to}`}>
              <td>
                {s.from} → {s.to}
              </td>
              <td>{secs(s.predicted_s)}</td>
              <td>{secs(s.release_all_s)}</td>
              <td>
                {secs(Math.max(0, s.release_all_s - s.predicted_s))}
                {s.kept.length > 0 ? ` (${s.kept.join(', ')})` : ''}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function GroupView({ group }: { group: GpuTimeReport['groups'][number] }) {
  const [picked, setPicked] = useState<number | null>(null);
  const steps = group.steps;
  const step = steps.find((s) => s.step === picked) ?? steps[steps.length - 1];
  if (step === undefined)
    return (
      <section className="card" data-testid={`gpu-group-${group.group}`}>
        <h2>{group.group}</h2>
        <p className="muted">
          No RL step completed yet: a step runs from one entry into {group.first_phase} to the next.
        </p>
      </section>
    );
  const holders = [
    ...new Set(step.bundles.flatMap((b) => b.segments.filter((s) => s.part === 'work').map((s) => s.holder))),
  ];
  const bubbles = BUBBLES.reduce((n, p) => n + (step.shares[p] ?? 0), 0);
  return (
    <section
      className="card"
      data-testid={`gpu-group-${group.group}`}
      data-step={step.step}
      data-from={step.from}
      data-to={step.to}
      data-gpus={step.bundles.length}
    >
      <h2>
        {group.group}: step {step.step} ({((step.to - step.from) / 1000).toFixed(1)} s, {step.bundles.length}{' '}
        GPUs)
      </h2>
      <p data-testid="gpu-bubbles">
        Colocation bubbles: <strong>{pct(bubbles)}</strong> of the step&apos;s GPU time
      </p>
      <table className="table compact" data-testid="gpu-shares">
        <thead>
          <tr>
            <th>part</th>
            <th>GPU-seconds</th>
            <th>share</th>
          </tr>
        </thead>
        <tbody>
          {GPU_TIME_PARTS.map((p) => (
            <tr key={p} data-part={p} data-gpu-seconds={step.gpu_seconds[p] ?? 0}>
              <td>
                <i className="swatch" style={{ background: PART_COLORS[p] }} /> {p.replace('_', ' ')}
              </td>
              <td>{(step.gpu_seconds[p] ?? 0).toFixed(1)}</td>
              <td>{pct(step.shares[p] ?? 0)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {group.predicted ? <Predicted predicted={group.predicted} step={step} /> : null}
      <h3>Who held each GPU</h3>
      <Legend holders={holders} />
      <Gantt step={step} />
      <h3>Trend over steps (share of GPU time per part; click a step)</h3>
      <Trend steps={steps} selected={step.step} onSelect={setPicked} />
    </section>
  );
}

/** Where each activation group's GPU time goes per RL step: a Gantt per GPU and the bubbles' shares. */
export function GpuTimePage() {
  const { report, error } = useGpuTime();
  return (
    <div className="page" data-testid="page-gputime">
      <GpuTimeBody report={report} error={error} />
    </div>
  );
}

export function GpuTimeBody({ report, error }: { report: GpuTimeReport | null; error: string | null }) {
  if (error) return <div className="alert alert-error">GPU-time report unreadable: {error}</div>;
  if (report === null) return <div className="placeholder">Waiting for the gateway…</div>;
  if (report.groups.length === 0)
    return <div className="placeholder">No activation group: nothing shares GPUs in this layout.</div>;
  return (
    <div className="stack">
      {report.groups.map((g) => (
        <GroupView key={g.group} group={g} />
      ))}
    </div>
  );
}
