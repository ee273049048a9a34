import type { TRPCError } from '@trpc/server';
import { UisError } from '@uis/spec';

type TrpcCode = TRPCError['code'];

/**
 * The tRPC code of each HTTP status of the error table (`ERROR_CODES` of @uis/spec), so a tRPC error answers the
 * status the REST door answers for the same code: `unknown_role` 404 NOT_FOUND, `operation_id_conflict` 409
 * CONFLICT, `no_eligible_replica` 503 SERVICE_UNAVAILABLE. tRPC has no code for 431 (headers too large): the HTTP
 * server refuses such a request before tRPC reads it, so no procedure throws it. Nor for 507 (`storage_full`): tRPC
 * answers it 500, its `data.error.code` still `storage_full`; REST answers 507.
 */
export const TRPC_CODE_OF_STATUS: Readonly<Record<number, TrpcCode>> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  402: 'PAYMENT_REQUIRED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_SUPPORTED',
  408: 'TIMEOUT',
  409: 'CONFLICT',
  412: 'PRECONDITION_FAILED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'UNPROCESSABLE_CONTENT',
  428: 'PRECONDITION_REQUIRED',
  429: 'TOO_MANY_REQUESTS',
  499: 'CLIENT_CLOSED_REQUEST',
  500: 'INTERNAL_SERVER_ERROR',
  501: 'NOT_IMPLEMENTED',
  502: 'BAD_GATEWAY',
  503: 'SERVICE_UNAVAILABLE',
  504: 'GATEWAY_TIMEOUT',
};

/** The tRPC code for an HTTP status: the table's, else the class's generic one (a 4xx BAD_REQUEST, else
 * INTERNAL_SERVER_ERROR). */
export function trpcCodeOfStatus(status: number): TrpcCode {
  return (
    TRPC_CODE_OF_STATUS[status] ?? (status >= 400 && status < 500 ? 'BAD_REQUEST' : 'INTERNAL_SERVER_ERROR')
  );
}

/** The tRPC code of what a command threw: a UisError's status (a relayed one included); anything else is our own
 * failure (500). */
export function trpcCodeOf(error: unknown): TrpcCode {
  return error instanceof UisError ? trpcCodeOfStatus(error.status) : 'INTERNAL_SERVER_ERROR';
}
