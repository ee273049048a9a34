import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  color: string;
}

/** One uPlot line chart: created once per series layout, then only fed new data (`setData`), which is what keeps a
 * 1 Hz refresh cheap (canvas redraw, no DOM diffing of points). `data[0]` holds the x values in seconds. */
export function UplotChart({
  title,
  series,
  data,
  unit,
  testId,
}: {
  title: string;
  series: ChartSeries[];
  data: uPlot.AlignedData;
  unit: string;
  testId: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const layout = series.map((s) => `${s.label}:${s.color}`).join('|');

  useEffect(() => {
    const el = host.current;
    if (el === null) return;
    const opts: uPlot.Options = {
      title,
      width: Math.max(280, el.clientWidth),
      height: 170,
      legend: { show: true },
      scales: { x: { time: true } },
      // Times in UTC, as the header's clock and every other time on the console (server logs are UTC too).
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      axes: [{}, { label: unit, size: 56 }],
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 1.5, spanGaps: false }))],
    };
    plot.current = new uPlot(opts, data, el);
    const resize = new ResizeObserver(() =>
      plot.current?.setSize({ width: Math.max(280, el.clientWidth), height: 170 }),
    );
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [layout, title, unit]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  const points = data[0]?.length ?? 0;
  const firstX = points > 0 ? (data[0]?.[0] ?? 0) : 0;
  const lastX = points > 0 ? (data[0]?.[points - 1] ?? 0) : 0;
  // What the e2e tests read to see the chart move and where its axis starts: its first and last x and the sum of
  // its first series.
  let sum = 0;
  for (const y of data[1] ?? []) sum += y ?? 0;
  return (
    <div
      className="chart"
      ref={host}
      data-testid={testId}
      data-points={points}
      data-first={firstX}
      data-last={lastX}
      data-sum={sum}
    />
  );
}
