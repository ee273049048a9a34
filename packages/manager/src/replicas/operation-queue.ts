import { type Clock, UisError } from '@uis/spec';
import { errorMessage } from '../runtime.ts';
import type { Audit } from './types.ts';

/** Runs a manager's lifecycle operations one at a time, audits each (`op.<name>` with its outcome and
 * duration), and lets a call whose key is already queued or running join it. Owns the shut-down flag: once
 * closed, queued operations and new ones are refused (`manager_shut_down`), except the shutdown itself. */
export class OperationQueue {
  #chain: Promise<unknown> = Promise.resolve();
  readonly #joinable = new Map<string, Promise<unknown>>();
  #closed = false;

  constructor(
    private readonly role: string,
    private readonly clock: Clock,
    private readonly audit: Audit,
  ) {}

  get closed(): boolean {
    return this.#closed;
  }

  /** Refuses everything queued after now; resolves once the running operation finished its step. */
  async close(): Promise<void> {
    const pending = this.#chain;
    this.#closed = true;
    await pending.catch(() => undefined);
  }

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const existing = this.#joinable.get(key);
    if (existing) return existing as Promise<T>;
    if (this.#closed && key !== 'shutdown') return Promise.reject(this.shutDown());
    const t0 = this.clock.now();
    const name = `op.${key.split(':')[0]}`;
    const run = this.#chain.then(async () => {
      if (this.#closed) throw this.shutDown();
      return fn();
    });
    const tracked = run.then(
      (v) => {
        this.#joinable.delete(key);
        this.audit(name, key, { ok: true }, this.clock.now() - t0);
        return v;
      },
      (e: unknown) => {
        this.#joinable.delete(key);
        this.audit(name, key, { ok: false, error: errorMessage(e) }, this.clock.now() - t0);
        throw e;
      },
    );
    this.#chain = tracked.catch(() => undefined);
    this.#joinable.set(key, tracked);
    return tracked;
  }

  private shutDown(): UisError {
    return new UisError({
      code: 'manager_shut_down',
      message: `${this.role} manager is shut down`,
    });
  }
}
