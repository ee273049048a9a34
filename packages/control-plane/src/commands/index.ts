import { type AnyCommand, type Permission, pathParams } from './define.ts';
import { COMMANDS } from './table.ts';

export {
  type AnyCommand,
  type Caller,
  type Command,
  type CommandArgs,
  type CommandContext,
  defineCommand,
  type Idempotency,
  type Permission,
  pathParams,
  permissionRefusal,
} from './define.ts';
export { type CommandAnswer, type CommandCall, checkOperationId, runCommand } from './run-command.ts';
export { COMMAND_TABLE, COMMANDS } from './table.ts';
export * from './wire.ts';

/** Where the admin API serves the table. */
export const ADMIN_PREFIX = '/admin';

/** One command as an HTTP route (for the REST adapter, the CLI and the OpenAPI generator). */
export interface CommandRoute {
  name: string;
  summary: string;
  method: 'GET' | 'POST';
  /** Full path with `{name}` parameters, e.g. `/admin/roles/{role}/drain`. */
  path: string;
  /** The same path as the router writes it, e.g. `/admin/roles/:role/drain`. */
  routerPath: string;
  params: string[];
  permission: Permission;
  idempotent: boolean;
  audited: boolean;
  /** The input field (seconds) a wait may block for, or null. */
  waitsUpTo: string | null;
  command: AnyCommand;
}

/** Every command of the table with its HTTP method and path, in table order. */
export function commandRoutes(): CommandRoute[] {
  return COMMANDS.map((c) => ({
    name: c.name,
    summary: c.summary,
    method: c.method,
    path: ADMIN_PREFIX + c.path.replace(/:([a-z_]+)/g, '{$1}'),
    routerPath: ADMIN_PREFIX + c.path,
    params: pathParams(c.path),
    permission: c.permission,
    idempotent: c.idempotency === 'keyed',
    audited: c.audit !== null,
    waitsUpTo: c.waitsUpTo ?? null,
    command: c,
  }));
}

/** The command named `name`, or undefined. */
export function commandNamed(name: string): AnyCommand | undefined {
  return COMMANDS.find((c) => c.name === name);
}
