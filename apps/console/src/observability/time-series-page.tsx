import type { TimeSeries } from '@uis/spec';
import { useMemo } from 'react';
import type uPlot from 'uplot';
import { roleColor } from '../lib/colors.ts';
import { UplotChart } from './uplot-chart.tsx';
import { useTimeSeries } from './use-time-series.ts';

const STATUS_COLORS = ['#d9480f', '#c2255c', '#862e9c', '#5f3dc4', '#1864ab', '#087f5b'];

function charts(s: TimeSeries) {
  const xs = s.points.map((p) => p.t / 1000);
  const col = (f: (p: TimeSeries['points'][number]) => number | null) => s.points.map(f);
  const statuses = [...new Set(s.points.flatMap((p) => Object.keys(p.errors)))].sort();
  const color = roleColor(s.role);
  return [
    {
      id: 'rps',
      title: 'requests/s',
      unit: 'req/s',
      series: [{ label: 'requests/s', color }],
      data: [xs, col((p) => p.requests_per_s)] as uPlot.AlignedData,
    },
    {
      id: 'tps',
      title: 'generated tokens/s',
      unit: 'tok/s',
      series: [{ label: 'tokens/s', color }],
      data: [xs, col((p) => p.tokens_per_s)] as uPlot.AlignedData,
    },
    {
      id: 'latency',
      title: 'latency (trailing 10 s)',
      unit: 'ms',
      series: [
        { label: 'p50', color },
        { label: 'p99', color: '#e8590c' },
      ],
      data: [xs, col((p) => p.latency_p50_ms), col((p) => p.latency_p99_ms)] as uPlot.AlignedData,
    },
    {
      id: 'ttft',
      title: 'time to first token, streams (trailing 10 s)',
      unit: 'ms',
      series: [
        { label: 'p50', color },
        { label: 'p99', color: '#e8590c' },
      ],
      data: [xs, col((p) => p.ttft_p50_ms), col((p) => p.ttft_p99_ms)] as uPlot.AlignedData,
    },
    {
      id: 'errors',
      title: 'errors/s by status (0: client left)',
      unit: 'err/s',
      series:
        statuses.length === 0
          ? [{ label: 'none', color: '#adb5bd' }]
          : statuses.map((st, i) => ({
              label: st,
              color: STATUS_COLORS[i % STATUS_COLORS.length] as string,
            })),
      data: [
        xs,
        ...(statuses.length === 0 ? [col(() => 0)] : statuses.map((st) => col((p) => p.errors[st] ?? 0))),
      ] as uPlot.AlignedData,
    },
  ];
}

function SeriesCard({ s }: { s: TimeSeries }) {
  const list = useMemo(() => charts(s), [s]);
  const key = `${s.role}-${s.model}`;
  return (
    <section className="card" data-testid={`series-${key}`}>
      <h2>
        {s.role} / {s.model}
      </h2>
      <div className="chart-grid">
        {list.map((c) => (
          <UplotChart
            key={c.id}
            title={c.title}
            unit={c.unit}
            series={c.series}
            data={c.data}
            testId={`chart-${key}-${c.id}`}
          />
        ))}
      </div>
    </section>
  );
}

/** Serving over the last 15 minutes per role and model, pushed every second from the gateway's in-memory ring. */
export function TimeSeriesPage() {
  const { series, error } = useTimeSeries();
  return (
    <div className="page" data-testid="page-timeseries">
      <TimeSeriesBody series={series} error={error} />
    </div>
  );
}

function TimeSeriesBody({ series, error }: { series: TimeSeries[]; error: string | null }) {
  if (error) return <div className="alert alert-error">Time series unreadable: {error}</div>;
  if (series.length === 0)
    return (
      <div className="placeholder" data-testid="no-series">
        No request served yet: the charts start with the first request.
      </div>
    );
  return (
    <div className="stack">
      {[...series]
        .sort((a, b) => `${a.role}/${a.model}`.localeCompare(`${b.role}/${b.model}`))
        .map((s) => (
          <SeriesCard key={`${s.role}/${s.model}`} s={s} />
        ))}
    </div>
  );
}
