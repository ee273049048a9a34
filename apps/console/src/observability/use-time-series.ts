import { useSubscription } from '@trpc/tanstack-react-query';
import { type TimeSeries, TimeSeriesUpdateSchema } from '@uis/spec';
import { useState } from 'react';
import { useTRPC } from '../api/trpc.ts';

/** Keeps the pushed series: the first push is the whole window, later ones append completed seconds; points older
 * than the window are dropped. */
export function mergeSeries(current: TimeSeries[], raw: unknown): TimeSeries[] {
  const update = TimeSeriesUpdateSchema.parse(raw);
  if (update.full) return update.series;
  const next = new Map(current.map((s) => [`${s.role}/${s.model}`, s]));
  for (const s of update.series) {
    const key = `${s.role}/${s.model}`;
    const old = next.get(key);
    const points = old === undefined ? s.points : [...old.points, ...s.points];
    next.set(key, { ...s, points: points.slice(-update.window_s) });
  }
  return [...next.values()];
}

export function useTimeSeries(): { series: TimeSeries[]; error: string | null } {
  const trpc = useTRPC();
  const [series, setSeries] = useState<TimeSeries[]>([]);
  const [error, setError] = useState<string | null>(null);
  useSubscription(
    trpc.timeSeries.subscriptionOptions(undefined, {
      onData: (data) => {
        try {
          setSeries((s) => mergeSeries(s, data));
          setError(null);
        } catch (e) {
          setError(e instanceof Error ? e.message : String(e));
        }
      },
    }),
  );
  return { series, error };
}
