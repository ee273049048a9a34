import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useSubscription } from '@trpc/tanstack-react-query';
import { type ConsoleState, ConsoleStateSchema, zodIssues } from '@uis/spec';
import { useMemo } from 'react';
import { describeError, useTRPC } from '../api/trpc.ts';

export type Connection = 'connecting' | 'live' | 'reconnecting' | 'failed';

export interface ConsoleStateResult {
  state: ConsoleState | null;
  connection: Connection;
  /** Why the gateway cannot be reached (while reconnecting or failed). */
  error: string | null;
  /** The gateway answered something that is not a console state: what is wrong, with its path. */
  invalid: string | null;
  retry: () => void;
}

/** The one source of live data: the `state` query seeds the cache, the `changes` subscription (SSE) overwrites it
 * with every pushed state. No component polls; the SSE link reconnects by itself and the query is refetched once
 * each time the stream (re)starts so nothing missed while disconnected lingers. */
export function useConsoleState(): ConsoleStateResult {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const query = useQuery({ ...trpc.state.queryOptions(), retry: false, refetchOnWindowFocus: false });
  const subscription = useSubscription(
    trpc.changes.subscriptionOptions(undefined, {
      onStarted: () => void queryClient.invalidateQueries({ queryKey: trpc.state.queryKey() }),
      onData: (data) => queryClient.setQueryData(trpc.state.queryKey(), data),
    }),
  );

  const raw = query.data;
  const parsed = useMemo(() => {
    if (raw === undefined) return { state: null, invalid: null };
    const result = ConsoleStateSchema.safeParse(raw);
    if (result.success) return { state: result.data, invalid: null };
    const issues = zodIssues(result.error);
    return {
      state: null,
      invalid: issues
        .slice(0, 5)
        .map((i) => `${i.path}: ${i.message}`)
        .join('; '),
    };
  }, [raw]);

  let connection: Connection;
  let error: string | null = null;
  if (subscription.status === 'pending') connection = 'live';
  else if (subscription.status === 'error') {
    connection = 'failed';
    error = describeError(subscription.error).message;
  } else if (subscription.error || query.error) {
    connection = 'reconnecting';
    error = describeError(subscription.error ?? query.error).message;
  } else connection = 'connecting';

  return {
    ...parsed,
    connection,
    error,
    retry: () => {
      subscription.reset();
      void query.refetch();
    },
  };
}
