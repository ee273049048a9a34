import { type Logger, UisError } from '@uis/spec';
import { errorMessage } from './runtime.ts';

/** What a SQLite error says about the file system under the database: full, unwritable, or nothing (null: the
 * error is not about storage). better-sqlite3 puts SQLite's extended code in `code`. */
export function storageFailure(e: unknown): 'storage_full' | 'storage_unwritable' | null {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return null;
  if (code === 'SQLITE_FULL') return 'storage_full';
  if (
    code.startsWith('SQLITE_READONLY') ||
    code.startsWith('SQLITE_IOERR') ||
    code.startsWith('SQLITE_CANTOPEN') ||
    code === 'SQLITE_PERM'
  )
    return 'storage_unwritable';
  return null;
}

/**
 * The database's writes as the operator sees them: a write the file system refuses becomes the error table's
 * `storage_full` (507) or `storage_unwritable` (503) naming the file, logged once per burst (the first refusal, then
 * one line when writes succeed again with how many were refused). Nothing here retries: SQLite rolled the refused
 * transaction back, so the caller's state is what it was, and the next write simply succeeds once space returns.
 */
export class StorageHealth {
  #burst: { code: string; refused: number } | null = null;

  constructor(
    readonly path: string,
    private readonly logger: Logger,
  ) {}

  /** True while writes are refused (since the last refusal, until a write succeeds). */
  get failing(): boolean {
    return this.#burst !== null;
  }

  /** `e` as a storage error of the table naming the file, or `e` itself when it is not about storage. */
  translate(e: unknown): unknown {
    if (e instanceof UisError) return e;
    const code = storageFailure(e);
    if (code === null) return e;
    if (this.#burst === null) {
      this.#burst = { code, refused: 0 };
      this.logger.error(
        { db: this.path, code, err: errorMessage(e) },
        code === 'storage_full'
          ? `the disk holding ${this.path} is full: writes are refused until space returns`
          : `${this.path} cannot be written: writes are refused until it can`,
      );
    }
    this.#burst.refused++;
    const message =
      code === 'storage_full'
        ? `the disk holding the database ${this.path} is full; nothing new is accepted until space returns (accepted work is kept)`
        : `the database ${this.path} cannot be written (${errorMessage(e)}); retry once it can`;
    return new UisError({ code, message, details: { db: this.path }, cause: e });
  }

  /** A write succeeded: a burst of refusals is over. */
  wrote(): void {
    const burst = this.#burst;
    if (burst === null) return;
    this.#burst = null;
    this.logger.info(
      { db: this.path, code: burst.code, refused: burst.refused },
      'the database accepts writes again',
    );
  }
}
