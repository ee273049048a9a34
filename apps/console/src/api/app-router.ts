/** The one line to switch once the gateway exports its router type: `export type { AppRouter } from
 * '@uis/gateway';` (type-only: the console never depends on the gateway at run time). */
export type { ConsoleApiRouter as AppRouter } from './console-api.ts';
