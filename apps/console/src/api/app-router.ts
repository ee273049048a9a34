import type { inferRouterOutputs } from '@trpc/server';
import type { AppRouter } from '@uis/control-plane';

/** The control plane's router type (its procedures derived from the command table), imported type-only: the
 * console never depends on a server package at run time. `testing/mock-router.ts` serves the console's part of
 * the same contract locally, for tests and the mock gateway. */
export type { AppRouter };

/** What a procedure of the real router answers: `{ok, operation_id, result}`. */
export type AppOutput<K extends keyof inferRouterOutputs<AppRouter>> = inferRouterOutputs<AppRouter>[K];
