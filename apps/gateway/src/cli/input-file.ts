import { type ErrorCode, UisError } from '@uis/spec';

/** Reads a file named by a flag (`--config`, `--sglang-config`); a problem is a 400 UisError at that flag. */
export function readInputFile(path: string, flag: string, readFile: (path: string) => string): string {
  try {
    return readFile(path);
  } catch (e) {
    const errno = (e as NodeJS.ErrnoException).code;
    const [code, reason]: [ErrorCode, string] =
      errno === 'ENOENT'
        ? ['missing_file', 'no such file']
        : errno === 'EISDIR'
          ? ['not_a_file', 'it is a directory; give the path of a file']
          : ['unreadable_file', e instanceof Error ? e.message : String(e)];
    throw new UisError({
      code,
      path: flag,
      message: `cannot read ${path}: ${reason}`,
      cause: e,
    });
  }
}
