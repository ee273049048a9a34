import { UisError } from '@uis/spec';
import { ProxyErrorCode } from './errors.ts';
import type { ProxyTarget } from './route-types.ts';
import { TIMEOUT_CODES, UNREACHABLE_CODES } from './upstream/engine-pool.ts';

/** The client's error for an attempt that failed before anything reached the client: 504 when the engine was too
 * slow, 502 `engine_unreachable` when the connection failed before the engine answered, 502
 * `engine_bad_response` / `engine_response_incomplete` when its answer was bad or cut. */
export function engineFailure(
  err: Error,
  code: string | undefined,
  target: ProxyTarget,
  gotResponse: boolean,
): UisError {
  if (code !== undefined && TIMEOUT_CODES.has(code))
    return new UisError({
      code: ProxyErrorCode.engineTimeout,
      message: `engine ${target.id} did not answer in time (${code === 'UPSTREAM_HEADERS_TIMEOUT' ? 'headers' : 'body'} timeout)`,
      cause: err,
    });
  if (!gotResponse && code !== undefined && UNREACHABLE_CODES.has(code))
    return new UisError({
      code: ProxyErrorCode.engineUnreachable,
      message: `engine ${target.id} at ${target.origin} is unreachable: ${err.message}`,
      cause: err,
    });
  return new UisError({
    code:
      code === 'UPSTREAM_BAD_RESPONSE'
        ? ProxyErrorCode.engineBadResponse
        : gotResponse
          ? ProxyErrorCode.engineResponseIncomplete
          : ProxyErrorCode.engineUnreachable,
    message: `engine ${target.id} failed: ${err.message}`,
    cause: err,
  });
}

/** The last attempt's error once retries were made: it says how many attempts failed on which replicas
 * (`details.attempts`, `details.engines`), so a client sees the retry budget was spent. */
export function gaveUp(
  last: UisError,
  attempts: number,
  tried: ReadonlySet<string> | undefined,
  target: ProxyTarget,
): UisError {
  const engines = [...(tried ?? [])];
  if (!engines.includes(target.id)) engines.push(target.id);
  return new UisError({
    code: last.code,
    message: `${last.message} (gave up after ${attempts} attempts on ${engines.join(', ')})`,
    details: { attempts, engines },
    cause: last,
  });
}
