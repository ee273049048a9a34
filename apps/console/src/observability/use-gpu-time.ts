import { useSubscription } from '@trpc/tanstack-react-query';
import { type GpuTimeReport, GpuTimeReportSchema } from '@uis/spec';
import { useState } from 'react';
import { useTRPC } from '../api/trpc.ts';

export function useGpuTime(): { report: GpuTimeReport | null; error: string | null } {
  const trpc = useTRPC();
  const [report, setReport] = useState<GpuTimeReport | null>(null);
  const [error, setError] = useState<string | null>(null);
  useSubscription(
    trpc.gpuTime.subscriptionOptions(undefined, {
      onData: (data) => {
        const parsed = GpuTimeReportSchema.safeParse(data);
        if (parsed.success) {
          setReport(parsed.data);
          setError(null);
        } else setError(parsed.error.issues[0]?.message ?? 'unreadable GPU-time report');
      },
    }),
  );
  return { report, error };
}
