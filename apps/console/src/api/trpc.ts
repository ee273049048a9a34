import { createTRPCClient, httpLink, httpSubscriptionLink, splitLink, TRPCClientError } from '@trpc/client';
import { createTRPCContext } from '@trpc/tanstack-react-query';
import { getAdminToken } from './admin-token.ts';
import type { AppRouter } from './app-router.ts';

export const { TRPCProvider, useTRPC, useTRPCClient } = createTRPCContext<AppRouter>();

/** Subscriptions go over SSE (EventSource cannot send headers: the token rides in the connection params);
 * queries and mutations over plain HTTP carrying the admin token as a bearer header. */
export function createConsoleClient(url = '/trpc', getToken: () => string | null = getAdminToken) {
  return createTRPCClient<AppRouter>({
    links: [
      splitLink({
        condition: (op) => op.type === 'subscription',
        // With a serving token set the gateway refuses reads without a token; EventSource sends no header, so
        // the subscription passes it as tRPC's connection params.
        true: httpSubscriptionLink({
          url,
          connectionParams: () => {
            const token = getToken();
            return token ? { token } : null;
          },
        }),
        false: httpLink({
          url,
          headers: () => {
            const token = getToken();
            return token ? { authorization: `Bearer ${token}` } : {};
          },
        }),
      }),
    ],
  });
}

export type ConsoleClient = ReturnType<typeof createConsoleClient>;

/** A message an operator can act on, from whatever a call threw. */
export function describeError(error: unknown): { message: string; unauthorized: boolean } {
  if (error instanceof TRPCClientError) {
    const code = (error.data as { code?: string } | undefined)?.code;
    const unauthorized =
      code === 'UNAUTHORIZED' || (error.data as { httpStatus?: number })?.httpStatus === 401;
    return { message: unauthorized ? `Refused: ${error.message}` : error.message, unauthorized };
  }
  return { message: error instanceof Error ? error.message : String(error), unauthorized: false };
}
