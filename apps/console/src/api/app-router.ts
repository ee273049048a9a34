/** The gateway's router type, imported type-only: the console never depends on the gateway at run time (a
 * devDependency for types). `console-api.ts` is the same contract as a local router, for tests and the mock. */
export type { AppRouter } from '@uis/gateway';
