import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { createConsoleClient, TRPCProvider } from '../api/trpc.ts';
import { AdminActionsProvider } from '../components/admin-actions.tsx';

/** The providers a page needs (queries, the tRPC client of `trpcUrl` sending `token()`, admin actions), as a
 * testing-library `wrapper`. */
export function providersFor(trpcUrl: string, token: () => string | null) {
  return function Providers({ children }: { children: ReactNode }) {
    const queryClient = new QueryClient();
    const client = createConsoleClient(trpcUrl, token);
    return (
      <QueryClientProvider client={queryClient}>
        <TRPCProvider trpcClient={client} queryClient={queryClient}>
          <AdminActionsProvider>{children}</AdminActionsProvider>
        </TRPCProvider>
      </QueryClientProvider>
    );
  };
}
