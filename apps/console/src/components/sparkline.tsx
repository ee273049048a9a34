import type { HealthSample } from '@uis/spec';

/** Health history: one bar per probe, height by latency, red where the probe failed. */
export function HealthSparkline({
  samples,
  width = 96,
  height = 18,
}: {
  samples: HealthSample[];
  width?: number;
  height?: number;
}) {
  if (samples.length === 0) return <span className="muted">no probes</span>;
  const max = Math.max(1, ...samples.map((s) => s.latency_ms ?? 0));
  // A fixed number of slots, newest on the right, so a young replica's few probes do not look like many.
  const slots = Math.max(samples.length, 24);
  const step = width / slots;
  const offset = slots - samples.length;
  const failed = samples.filter((s) => !s.ok).length;
  const last = samples[samples.length - 1]!;
  return (
    <svg
      className="sparkline"
      width={width}
      height={height}
      role="img"
      aria-label={`${samples.length} probes, ${failed} failed`}
      data-testid="health-sparkline"
    >
      <title>
        {`${samples.length} probes, ${failed} failed; last ${last.ok ? `ok ${last.latency_ms ?? '?'} ms` : `failed: ${last.error ?? 'error'}`}`}
      </title>
      {samples.map((s, i) => {
        const h = s.ok ? Math.max(2, ((s.latency_ms ?? 0) / max) * (height - 2)) : height;
        return (
          <rect
            key={s.at}
            x={(offset + i) * step + 0.5}
            y={height - h}
            width={Math.max(1, step - 1)}
            height={h}
            className={s.ok ? 'spark-ok' : 'spark-fail'}
          />
        );
      })}
    </svg>
  );
}
