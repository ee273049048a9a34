import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render } from '@testing-library/react';
import type { ReactNode } from 'react';
import { createConsoleClient, TRPCProvider } from '../src/api/trpc.ts';
import { App } from '../src/app.tsx';
import { AdminActionsProvider } from '../src/components/admin-actions.tsx';

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

/** Renders the whole console against `trpcUrl`, sending `token()`. Queries never go stale by themselves, so what a
 * test shows came from the answers (and the stream) it arranged. */
export function renderApp(trpcUrl: string, token: () => string | null) {
  const queryClient = new QueryClient({
    defaultOptions: { queries: { staleTime: Number.POSITIVE_INFINITY } },
  });
  const client = createConsoleClient(trpcUrl, token);
  return render(
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={client} queryClient={queryClient}>
        <App />
      </TRPCProvider>
    </QueryClientProvider>,
  );
}
