import { UisError, zodError } from '@uis/spec';
import type { ControlPlane } from '../control-plane.ts';
import type { AnyCommand, CommandArgs, CommandContext } from './define.ts';

/** One call of a command as a door (REST, tRPC, CLI) received it, before validation. */
export interface CommandCall {
  /** The path parameters (REST: the URL's `:name` segments; tRPC: the same fields of its input). */
  params: Record<string, unknown>;
  /** The body (POST) or query (GET), without the operation id. */
  input: unknown;
  actor: string;
  operationId: string | null;
  signal?: AbortSignal;
  /** Where the door's caller wrote the input, for error paths: `body`, `query` or `input`. */
  inputRoot: string;
  /** Where the caller wrote the params: REST '' (the name alone, e.g. `role`), tRPC `input`. */
  paramsRoot: string;
  /** The audit subject when the call is refused before its own subject is known (e.g. the URL path). */
  fallbackSubject: string;
}

/** The one answer of every command through every door. */
export interface CommandAnswer<R = unknown> {
  ok: true;
  operation_id: string | null;
  result: R;
}

const MAX_OPERATION_ID = 200;

/** Checks an operation id: 1 to 200 characters, not blank (every call sending a blank id would share one
 * operation and get its result). `path` names where the caller wrote it. */
export function checkOperationId(id: string, path: string): string {
  if (id.trim() === '' || id.length > MAX_OPERATION_ID)
    throw new UisError({
      code: 'invalid_input',
      path,
      message: `an operation id must be 1 to ${MAX_OPERATION_ID} characters, not blank; omit it to run without one`,
    });
  return id;
}

/**
 * Runs a command the same way for every door: validates params and input, runs a keyed command once per
 * operation id (a repeat answers the first result; the same id with another request is 409), checks the result
 * against the output schema, and writes the audit event `admin.<name>` (refusals included) with the caller as actor.
 */
export async function runCommand(
  plane: ControlPlane,
  cmd: AnyCommand,
  call: CommandCall,
): Promise<CommandAnswer> {
  const operationId = cmd.idempotency === 'keyed' ? call.operationId : null;
  let subject = call.fallbackSubject;
  try {
    const params = cmd.params.safeParse(call.params);
    if (!params.success) throw zodError(params.error, call.paramsRoot);
    const input = cmd.input.safeParse(call.input);
    if (!input.success) throw zodError(input.error, call.inputRoot);
    const args: CommandArgs<unknown, unknown> = { params: params.data, input: input.data };
    if (cmd.audit) subject = cmd.audit.subject(args, plane);
    const ctx: CommandContext = {
      actor: call.actor,
      operationId,
      signal: call.signal ?? new AbortController().signal,
    };
    const once = async () => {
      const result: unknown = cmd.output.parse(await cmd.handler(plane, args, ctx));
      if (cmd.audit) audit(plane, cmd, call, subject, operationId, null, cmd.audit.request?.(args));
      return result;
    };
    const request = { command: cmd.name, params: params.data, input: call.input };
    const result = operationId === null ? await once() : await plane.ledger.run(operationId, request, once);
    // An audited command wrote its record: the disk takes writes again.
    if (cmd.audit) plane.storage.wrote();
    return { ok: true, operation_id: operationId, result: result ?? null };
  } catch (thrown) {
    // A write the disk refused: `storage_full` / `storage_unwritable` naming the file (its audit record would be
    // refused the same way, so none is attempted).
    const e = plane.storage.translate(thrown);
    if (cmd.audit && !plane.storage.failing) {
      const code = e instanceof UisError ? e.code : 'internal_error';
      const error = { code, message: e instanceof Error ? e.message : String(e) };
      try {
        audit(plane, cmd, call, subject, operationId, error);
      } catch (refused) {
        // The refusal stands when only its record was refused by the disk (logged once per burst).
        if (plane.storage.translate(refused) === refused) throw refused;
      }
    }
    throw e;
  }
}

/** The audit record of an audited command (a success, or a refusal with its error), and its log line at info:
 * operators read weight updates, drains and refusals in the terminal as they happen. */
function audit(
  plane: ControlPlane,
  cmd: AnyCommand,
  call: CommandCall,
  subject: string,
  operationId: string | null,
  error: { code: string; message: string } | null,
  summary?: Record<string, unknown>,
): void {
  const request = summary ?? auditRequest(call);
  plane.events.append({
    kind: `admin.${cmd.name}`,
    subject,
    actor: call.actor,
    operation_id: operationId,
    data: error === null ? { ok: true, request } : { ok: false, request, error },
  });
  const line = { command: cmd.name, subject, actor: call.actor, operation_id: operationId, request };
  if (error === null) plane.logger.info(line, `${cmd.name} done`);
  else plane.logger.info({ ...line, code: error.code, error: error.message }, `${cmd.name} refused`);
}

/** What the audit record keeps of a request: the params and the input as sent, bounded (a body of any size may be
 * refused, and every record is kept in the database and logged). */
function auditRequest(call: CommandCall): Record<string, unknown> {
  const input = call.input !== null && typeof call.input === 'object' ? (call.input as object) : {};
  return bounded({ ...call.params, ...input }, 0) as Record<string, unknown>;
}

const MAX_ITEMS = 16;
const MAX_CHARS = 500;
const MAX_DEPTH = 6;

/** `value` with long strings cut, long arrays shortened and deep nesting stopped, each saying what was left out. */
export function bounded(value: unknown, depth: number): unknown {
  if (typeof value === 'string')
    return value.length <= MAX_CHARS
      ? value
      : `${value.slice(0, MAX_CHARS)}... (${value.length - MAX_CHARS} more characters)`;
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '... (nested deeper)';
  if (Array.isArray(value)) {
    const kept = value.slice(0, MAX_ITEMS).map((v) => bounded(v, depth + 1));
    return value.length <= MAX_ITEMS ? kept : [...kept, `... (${value.length - MAX_ITEMS} more items)`];
  }
  const entries = Object.entries(value);
  const kept = entries.slice(0, MAX_ITEMS).map(([k, v]) => [k, bounded(v, depth + 1)]);
  if (entries.length > MAX_ITEMS) kept.push(['...', `${entries.length - MAX_ITEMS} more keys`]);
  return Object.fromEntries(kept);
}
