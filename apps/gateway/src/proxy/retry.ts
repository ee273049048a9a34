import { type Clock, systemClock } from '@uis/spec';
import { UNREACHABLE_CODES } from './upstream/engine-pool.ts';

/**
 * When the serving proxy sends a failed request to another replica, and how long it waits first.
 *
 * A request is sent again only when its engine produced no byte of an answer, so nothing can have reached the
 * client and no answer to it exists anywhere:
 *
 * | attempt failed with | retried | why |
 * | --- | --- | --- |
 * | connect refused, host/net unreachable, DNS failure, connect timeout, pool closed before the write | yes | the engine never received the request |
 * | connection reset or closed after the write, before any response byte (`ECONNRESET`, `EPIPE`, `UPSTREAM_CLOSED`) | yes | the engine dropped the request without answering (it died or restarted); SGLang aborts a request whose connection is gone, so the replay is the only run that answers |
 * | headers or body timeout | no | the engine may still be generating: a replay doubles the work of an engine that is only slow |
 * | any response byte, including a 5xx status or a cut answer | no | the engine acted on the request; a stream is never replayed, a status is the engine's answer and is relayed |
 * | an answer that is not HTTP/1.1 | no | the engine answered; a replay would not fix it (its circuit opens instead) |
 *
 * Each retry goes to a replica this request has not tried yet and whose circuit is not open (routing skips open
 * ones); when none is left the last attempt's error is the answer. Before retry `n` (1-based) the request waits
 * `min(max, initial * multiplier^(n-1))`, minus a random share of up to `jitter` of it, on the injected clock.
 */
export interface RetryOptions {
  /** Retries after the first attempt (0: none). */
  maxRetries: number;
  /** Wait before the first retry, in ms. */
  initialBackoffMs: number;
  /** Cap of any wait, in ms. */
  maxBackoffMs: number;
  /** Growth of the wait from one retry to the next. */
  backoffMultiplier: number;
  /** Share of each wait taken off at random, 0..1 (0: exact waits; 0.5: between half and the whole). */
  jitter: number;
}

/** `gateway.retry`'s defaults: two retries, 10 ms then 20 ms (each up to half shorter), never over 200 ms. */
export const DEFAULT_RETRY_OPTIONS: RetryOptions = {
  maxRetries: 2,
  initialBackoffMs: 10,
  maxBackoffMs: 200,
  backoffMultiplier: 2,
  jitter: 0.5,
};

/** An attempt that failed with this error code may be sent to another replica if the engine sent no response
 * byte (the caller knows that part). */
export function retryableCode(code: string | undefined): boolean {
  return code !== undefined && UNREACHABLE_CODES.has(code);
}

/** The retry rules and the clock their waits run on. Consulted only after an attempt failed: the serving path of
 * a request that succeeds never touches it. */
export class RetryPolicy {
  readonly options: RetryOptions;
  readonly #clock: Clock;
  readonly #random: () => number;

  constructor(
    options: Partial<RetryOptions> = {},
    clock: Clock = systemClock,
    random: () => number = Math.random,
  ) {
    this.options = { ...DEFAULT_RETRY_OPTIONS, ...options };
    this.#clock = clock;
    this.#random = random;
  }

  get maxRetries(): number {
    return this.options.maxRetries;
  }

  /** The wait before retry `n` (1-based), jitter applied. */
  backoffMs(n: number): number {
    const o = this.options;
    const full = Math.min(o.maxBackoffMs, o.initialBackoffMs * o.backoffMultiplier ** Math.max(0, n - 1));
    return Math.round(full * (1 - o.jitter * this.#random()));
  }

  /** Waits before retry `n`; rejects when `signal` aborts (the client left). */
  wait(n: number, signal?: AbortSignal): Promise<void> {
    return this.#clock.sleep(this.backoffMs(n), signal);
  }
}

export const DEFAULT_RETRY_POLICY = new RetryPolicy();
