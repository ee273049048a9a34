import { UisError } from '@uis/spec';

/** Default process-wide budget for bytes held in request bodies still arriving: a few large uploads fit, a
 * thousand stalled ones do not take the process down. */
export const DEFAULT_BODY_BUDGET_BYTES = 512 * 1024 * 1024;

/** Seconds a client is told to wait when the budget is spent (bodies in flight finish or hit the body deadline). */
export const BODY_BUDGET_RETRY_AFTER_S = 1;

/** Bytes held by request bodies that are still arriving, across the whole process. A body takes its bytes as they
 * come and gives them all back when it ends, fails or is refused; a new body is refused while the budget is spent. */
export class BodyBudget {
  #used = 0;
  constructor(readonly limit: number = DEFAULT_BODY_BUDGET_BYTES) {}

  get used(): number {
    return this.#used;
  }

  /** Whether a new body may start being read now. */
  get open(): boolean {
    return this.#used < this.limit;
  }

  /** Takes `n` more bytes for a body; false (nothing taken) when that would pass the limit. */
  take(n: number): boolean {
    if (this.#used + n > this.limit) return false;
    this.#used += n;
    return true;
  }

  release(n: number): void {
    this.#used -= n;
  }
}

/** The 503 of a body refused because bodies in flight hold the whole budget. */
export function bodyBudgetSpent(limit: number): UisError {
  return new UisError({
    code: 'body_budget_exhausted',
    path: 'body',
    message: `request bodies still arriving hold the gateway's ${limit} byte budget; retry after ${BODY_BUDGET_RETRY_AFTER_S} s`,
  });
}
