import { TRPCError } from '@trpc/server';
import { getHTTPStatusCodeFromError } from '@trpc/server/http';
import { ERROR_CODES, type ErrorCode, statusOf, UisError } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { TRPC_CODE_OF_STATUS, trpcCodeOf } from './error-codes.ts';

/** The HTTP status tRPC answers for a procedure that threw `error` the way the app router throws it. */
const trpcStatus = (error: unknown) =>
  getHTTPStatusCodeFromError(new TRPCError({ code: trpcCodeOf(error), message: 'x', cause: error }));

describe('tRPC error codes follow the error table', () => {
  it("answers every code of the table with the table's status (431 and 507 aside: tRPC has no code for them)", () => {
    const differing = (Object.keys(ERROR_CODES) as ErrorCode[])
      .map((code) => ({
        code,
        table: statusOf(code),
        trpc: trpcStatus(new UisError({ code, message: 'x' })),
      }))
      .filter((c) => c.table !== c.trpc);
    expect(differing).toEqual([
      { code: 'headers_too_large', table: 431, trpc: 400 },
      { code: 'storage_full', table: 507, trpc: 500 },
    ]);
    // Spot checks of what the issue reported: the tRPC door answered 400 for these.
    expect(trpcCodeOf(new UisError({ code: 'unknown_role', message: 'x' }))).toBe('NOT_FOUND');
    expect(trpcCodeOf(new UisError({ code: 'operation_id_conflict', message: 'x' }))).toBe('CONFLICT');
    expect(trpcCodeOf(new UisError({ code: 'no_eligible_replica', message: 'x' }))).toBe(
      'SERVICE_UNAVAILABLE',
    );
  });

  it('maps each status to the tRPC code tRPC itself answers that status with', () => {
    for (const [status, code] of Object.entries(TRPC_CODE_OF_STATUS))
      expect([status, getHTTPStatusCodeFromError(new TRPCError({ code }))]).toEqual([status, Number(status)]);
  });

  it("keeps a relayed failure's status, and answers 500 for an error that is not the product's", () => {
    const relayed = new UisError({ code: 'engine_error', message: 'x', relayedStatus: 422 });
    expect(trpcStatus(relayed)).toBe(422);
    expect(trpcStatus(new TypeError('bug'))).toBe(500);
  });
});
