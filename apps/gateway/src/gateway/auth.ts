import { timingSafeEqual } from 'node:crypto';
import { type Caller, type Permission, permissionRefusal } from '@uis/control-plane';
import { UisError } from '@uis/spec';

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | string[] | null | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (typeof value !== 'string') return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(value);
  return m?.[1];
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** True when the header carries one of `accepted` (compared in constant time). */
export function authorized(
  header: string | string[] | null | undefined,
  accepted: readonly string[],
): boolean {
  const token = bearerToken(header);
  if (token === undefined) return false;
  let ok = false;
  for (const a of accepted) if (sameSecret(token, a)) ok = true;
  return ok;
}

export function unauthorized(what: string): UisError {
  return new UisError({
    code: 'unauthorized',
    path: 'headers.authorization',
    message: `${what} needs "Authorization: Bearer <token>" with a valid token`,
  });
}

/** The tokens a server was given: the admin token, and the serving token when one is configured. */
export interface ServerTokens {
  admin: string;
  serving?: string | undefined;
}

/** What the `Authorization` header proves: the admin token, the serving token, or nothing. */
export function callerOf(header: string | string[] | null | undefined, tokens: ServerTokens): Caller {
  if (authorized(header, [tokens.admin])) return 'admin';
  if (tokens.serving !== undefined && authorized(header, [tokens.serving])) return 'serving';
  return 'anonymous';
}

/** Why a request may not run a command of `permission` (401 without a valid token, 403 with the serving token on
 * an admin command), or null when it may: the command table's rule (`permissionRefusal`), for every door. */
export function commandRefusal(
  header: string | string[] | null | undefined,
  permission: Permission,
  tokens: ServerTokens,
): UisError | null {
  const why = permissionRefusal(permission, callerOf(header, tokens), tokens.serving !== undefined);
  if (why === null) return null;
  if (why === 'unauthorized')
    return unauthorized(
      permission === 'admin' ? 'this command (admin)' : 'this read (serving or admin token)',
    );
  return new UisError({
    code: 'forbidden',
    path: 'headers.authorization',
    message: 'this command needs the admin token; the serving token only reads',
  });
}
