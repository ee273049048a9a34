import { z } from 'zod';
import { type ErrorCode, isErrorCode, statusOf } from './error-codes.ts';

/** Every error the product returns has this JSON shape: a stable code, a message that says what to change, and
 * the path of what is wrong when there is one (`roles.genrm.models[1].engine_groups[0].tp`, `body.messages`). */
export const ErrorBodySchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    path: z.string().optional(),
    details: z.unknown().optional(),
  }),
  /** The message again, where FastAPI puts it (`{"detail": "..."}`): Relax's callers read this field. */
  detail: z.string().optional(),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

export interface UisErrorInit {
  code: ErrorCode;
  message: string;
  /** For a code in RELAYED_STATUS_CODES: the status of the answer or failure it passes on. */
  relayedStatus?: number;
  path?: string;
  details?: unknown;
  cause?: unknown;
}

/** An error as a value: stable `code`, its HTTP `status` from the error-code table, and the `path` it concerns. */
export class UisError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly path: string | undefined;
  readonly details: unknown;

  constructor(init: UisErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'UisError';
    this.code = init.code;
    this.status = statusOf(init.code, init.relayedStatus);
    this.path = init.path;
    this.details = init.details;
  }

  toJSON(): ErrorBody {
    const error: ErrorBody['error'] = { code: this.code, message: this.message };
    if (this.path !== undefined) error.path = this.path;
    if (this.details !== undefined) error.details = this.details;
    return { error, detail: this.message };
  }
}

export function isUisError(e: unknown): e is UisError {
  return e instanceof UisError;
}

/** Formats a zod issue path the way users write it: `roles.genrm.models[1].engine_groups[0].tp`. */
export function formatPath(path: ReadonlyArray<PropertyKey>, root = ''): string {
  let out = root;
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out;
}

export interface PathIssue {
  code: ErrorCode;
  path: string;
  message: string;
}

/** The stable code of a zod issue: `invalid_type`, `invalid_value`, `too_small` -> `invalid_too_small`, ...
 * (a zod code the table does not know yet reads as `invalid_input`). */
export function issueCode(zodCode: string): ErrorCode {
  const code = zodCode.startsWith('invalid_') ? zodCode : `invalid_${zodCode}`;
  return isErrorCode(code) ? code : 'invalid_input';
}

/** Turns a zod error into one issue per problem, each naming its path. */
export function zodIssues(error: z.ZodError, root = ''): PathIssue[] {
  return error.issues.map((issue) => ({
    code: issueCode(issue.code),
    path: formatPath(issue.path, root) || root || '(root)',
    message: issue.message,
  }));
}

/** A 400 UisError listing every issue of `error` (paths under `root`) in its message and details; its `path` is
 * the first issue's. */
export function zodError(error: z.ZodError, root = '', code: ErrorCode = 'invalid_input'): UisError {
  const issues = zodIssues(error, root);
  return new UisError({
    code,
    path: issues[0]?.path ?? (root === '' ? undefined : root),
    message: issues.map((i) => `${i.path}: ${i.message}`).join('; '),
    details: issues,
  });
}

/** Parses `input` with `schema` or throws a 400 UisError whose details list every issue with its path. */
export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  input: unknown,
  root = '',
  code: ErrorCode = 'invalid_input',
): z.infer<T> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw zodError(result.error, root, code);
}

const isPathIssue = (d: unknown): d is PathIssue =>
  typeof d === 'object' && d !== null && 'code' in d && 'path' in d && 'message' in d;

/** Every issue a caught error stands for, for callers that list them (`uis plan`, the console's Plan page): the
 * `{code, path, message}` details of a UisError (parseOrThrow, loadConfig, the legacy adapter), else the error
 * itself as one issue at its path or `root`. */
export function errorIssues(error: unknown, root = '(root)'): PathIssue[] {
  if (isUisError(error)) {
    const issues = Array.isArray(error.details) ? error.details.filter(isPathIssue) : [];
    if (issues.length > 0) return issues;
    return [{ code: error.code, path: error.path ?? root, message: error.message }];
  }
  return [
    { code: 'internal_error', path: root, message: error instanceof Error ? error.message : String(error) },
  ];
}
