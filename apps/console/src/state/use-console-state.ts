import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useSubscription } from '@trpc/tanstack-react-query';
import { type ConsoleState, ConsoleStateSchema, zodIssues } from '@uis/spec';
import { useEffect, useMemo, useRef } from 'react';
import { setAdminToken, useAdminToken } from '../api/admin-token.ts';
import { describeError, useTRPC } from '../api/trpc.ts';

/** `locked`: the gateway has a serving token and refused the reads (no token, or a refused one). */
export type Connection = 'connecting' | 'live' | 'reconnecting' | 'failed' | 'locked';

export interface ConsoleStateResult {
  state: ConsoleState | null;
  connection: Connection;
  /** Why the gateway cannot be reached (while reconnecting or failed). */
  error: string | null;
  /** The gateway answered something that is not a console state: what is wrong, with its path. */
  invalid: string | null;
  /** The gateway refused the reads (401): it has a serving token and the console must sign in first. */
  needsToken: boolean;
  retry: () => void;
}

/** The one source of live data: the `state` query seeds the cache, the `changes` subscription (SSE) overwrites it
 * with every pushed state. No component polls; the SSE link reconnects by itself and the query is refetched once
 * each time the stream (re)starts so nothing missed while disconnected lingers. While the gateway refuses the reads
 * (a serving token is configured) the stream stays closed, so it does not spend the client's failed-auth budget,
 * until a token is kept: then the state is asked again and the stream opens once it is answered. */
export function useConsoleState(): ConsoleStateResult {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const token = useAdminToken();
  const query = useQuery({ ...trpc.state.queryOptions(), retry: false, refetchOnWindowFocus: false });
  const needsToken = query.error !== null && describeError(query.error).unauthorized;
  const refetch = query.refetch;
  const seenToken = useRef(token);
  const tokenChangedAt = useRef(0);
  useEffect(() => {
    if (seenToken.current === token) return;
    seenToken.current = token;
    tokenChangedAt.current = Date.now();
    void refetch();
  }, [token, refetch]);
  // A kept token the gateway refuses (changed since the sign-in) is forgotten, so the console asks again; only a
  // refusal answered after the token was kept counts (the one before it was the reason to sign in).
  useEffect(() => {
    if (needsToken && token !== null && query.errorUpdatedAt > tokenChangedAt.current) setAdminToken(null);
  }, [needsToken, token, query.errorUpdatedAt]);
  const subscription = useSubscription(
    trpc.changes.subscriptionOptions(undefined, {
      enabled: !needsToken,
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
  if (needsToken) {
    connection = 'locked';
    error = describeError(query.error).message;
  } else if (subscription.status === 'pending') connection = 'live';
  else if (subscription.status === 'error') {
    connection = 'failed';
    error = describeError(subscription.error).message;
  } else if (subscription.error || query.error) {
    connection = 'reconnecting';
    error = describeError(subscription.error ?? query.error).message;
  } else connection = 'connecting';

  return {
    // Refused reads show nothing, not the state an earlier (now forgotten) token read.
    ...(needsToken ? { state: null, invalid: null } : parsed),
    connection,
    needsToken,
    error,
    retry: () => {
      subscription.reset();
      void query.refetch();
    },
  };
}
