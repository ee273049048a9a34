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
    // The gateway refuses reads before tRPC (its own `{error: {code, message}}` body, no tRPC data): the HTTP
    // status of the response tells.
    const status =
      (error.data as { httpStatus?: number } | undefined)?.httpStatus ??
      (error.meta as { response?: { status?: number } } | undefined)?.response?.status;
    const unauthorized = code === 'UNAUTHORIZED' || status === 401;
    // Such a refusal (401, 429 after too many failed sign-ins) has the product's message in its body.
    const own = (error.meta as { responseJSON?: { error?: { message?: unknown } } } | undefined)?.responseJSON
      ?.error?.message;
    const message = error.data === undefined && typeof own === 'string' ? own : error.message;
    return { message: unauthorized ? `Refused: ${message}` : message, unauthorized };
  }
  return { message: error instanceof Error ? error.message : String(error), unauthorized: false };
}
