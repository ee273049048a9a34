import type { z } from 'zod';
import type { ControlPlane } from '../control-plane.ts';

/** Who may call a command: the admin token, the serving token (or the admin token), or anyone. */
export type Permission = 'admin' | 'serving' | 'public';

/** What a caller proved: the admin token, the serving token, or nothing. */
export type Caller = 'admin' | 'serving' | 'anonymous';

/**
 * Whether `caller` may run a command of `permission`; every door (admin REST, tRPC, the CLI through REST) asks this
 * one function. `serving` follows the serving token as discovery and the console API do: with one configured it
 * takes that token or the admin token, without one it is open. Answers the permissionRefusal: `unauthorized` (401, no valid
 * token) or `forbidden` (403, a serving token on an admin command), or null when allowed.
 */
export function permissionRefusal(
  permission: Permission,
  caller: Caller,
  servingTokenSet: boolean,
): 'unauthorized' | 'forbidden' | null {
  if (permission === 'public' || caller === 'admin') return null;
  if (permission === 'serving') return caller === 'serving' || !servingTokenSet ? null : 'unauthorized';
  return caller === 'serving' ? 'forbidden' : 'unauthorized';
}

/** `keyed`: a mutation that takes an operation id (`Idempotency-Key` header, body `operation_id`, tRPC input
 * `operation_id`, CLI `--idempotency-key`); a repeat answers the first result, the same id with another input is 409.
 * `none`: a read or a wait, which changes nothing. */
export type Idempotency = 'keyed' | 'none';

/** Who runs a command and from which door, for the audit record and for the handler. */
export interface CommandContext {
  actor: string;
  operationId: string | null;
  /** Aborts when the caller gives up (a disconnected HTTP client). */
  signal: AbortSignal;
}

export interface CommandArgs<P, I> {
  params: P;
  input: I;
}

/**
 * One operator command, declared once. The admin REST routes, the tRPC procedures and the CLI are derived from it:
 * `method` + `path` (under `/admin`, `:name` segments are `params`), `input` is the JSON body of a POST or the query
 * of a GET, `output` the `result` of the answer envelope `{ok, operation_id, result}`.
 */
export interface Command<
  P extends z.ZodObject = z.ZodObject,
  I extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
  M extends 'GET' | 'POST' = 'GET' | 'POST',
> {
  name: string;
  summary: string;
  method: M;
  path: string;
  params: P;
  input: I;
  output: O;
  permission: Permission;
  idempotency: Idempotency;
  /** A wait (the trainer's barrier): the input field, in seconds, the call may block for. A client gives the call
   * that long, and reports its 503 or 504 rather than retrying it. */
  waitsUpTo?: string;
  /** Audited commands write `admin.<name>` with this subject, whether they succeed or are refused; null: not
   * audited (reads, and barrier waits a trainer may poll). */
  audit: {
    subject: (args: CommandArgs<z.infer<P>, z.infer<I>>, plane: ControlPlane) => string;
    /** What the audit record and its log line keep of an accepted request, when the params and input as sent would
     * be too much (a batch's samples); a refused request keeps what was sent, bounded. */
    request?: (args: CommandArgs<z.infer<P>, z.infer<I>>) => Record<string, unknown>;
  } | null;
  handler: (
    plane: ControlPlane,
    args: CommandArgs<z.infer<P>, z.infer<I>>,
    ctx: CommandContext,
  ) => Promise<z.input<O>> | z.input<O>;
}

/** Declares a command with its types inferred from its schemas. */
export function defineCommand<
  P extends z.ZodObject,
  I extends z.ZodType,
  O extends z.ZodType,
  M extends 'GET' | 'POST',
>(c: Command<P, I, O, M>): Command<P, I, O, M> {
  return c;
}

/** Any command of the table (its schemas erased to their base types). */
// biome-ignore lint/suspicious/noExplicitAny: the table holds commands of different schemas
export type AnyCommand = Command<any, any, any, 'GET' | 'POST'>;

/** The `:name` segments of a command path. */
export function pathParams(path: string): string[] {
  return path
    .split('/')
    .filter((s) => s.startsWith(':'))
    .map((s) => s.slice(1));
}
