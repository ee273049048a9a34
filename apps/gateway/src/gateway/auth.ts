import { timingSafeEqual } from 'node:crypto';
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
