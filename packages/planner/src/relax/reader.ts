import { type ErrorCode, formatPath, type PathIssue, type ServerArgValue } from '@uis/spec';
import type { z } from 'zod';
import type { FlagValue } from './argparse.ts';

/** Typed reads of tokenized flags; every problem becomes an issue at the flag it concerns. */
export class FlagReader {
  constructor(
    readonly values: ReadonlyMap<string, FlagValue>,
    readonly issues: PathIssue[] = [],
  ) {}

  add(flag: string, message: string, code: ErrorCode = 'invalid_flag'): void {
    this.issues.push({ code, path: flag.startsWith('--') ? flag : `--${flag}`, message });
  }

  has(name: string): boolean {
    return this.values.has(name);
  }

  str(name: string): string | undefined {
    const v = this.values.get(name);
    return typeof v === 'string' ? v : undefined;
  }

  /** A switch; `undefined` when not given (BooleanOptionalAction's default None). */
  switch(name: string): boolean | undefined {
    const v = this.values.get(name);
    return typeof v === 'boolean' ? v : undefined;
  }

  bool(name: string): boolean {
    return this.values.get(name) === true;
  }

  list(name: string): string[] | undefined {
    const v = this.values.get(name);
    return Array.isArray(v) ? v : undefined;
  }

  int(name: string, min = 1): number | undefined {
    const v = this.str(name);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (v.trim() === '' || !Number.isInteger(n) || n < min) {
      this.add(name, `--${name} must be a whole number >= ${min}, got "${v}"`);
      return undefined;
    }
    return n;
  }

  number(name: string): number | undefined {
    const v = this.str(name);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n)) {
      this.add(name, `--${name} must be a number, got "${v}"`);
      return undefined;
    }
    return n;
  }

  json(name: string): unknown {
    const v = this.str(name);
    if (v === undefined) return undefined;
    try {
      return JSON.parse(v);
    } catch (e) {
      this.add(name, `--${name} must be JSON: ${e instanceof Error ? e.message : String(e)}`, 'invalid_json');
      return undefined;
    }
  }

  /** Parses a JSON flag with a schema; `undefined` (with issues) when absent or invalid. */
  parsed<T>(name: string, schema: z.ZodType<T>, fallback?: unknown): T | undefined {
    const raw = this.json(name) ?? fallback;
    if (raw === undefined) return undefined;
    const r = schema.safeParse(raw);
    if (r.success) return r.data;
    this.zod(`--${name}`, r.error);
    return undefined;
  }

  zod(flag: string, error: z.ZodError): void {
    for (const issue of error.issues) {
      this.add(`${flag}${issue.path.length ? ` ${formatPath(issue.path)}` : ''}`, issue.message);
    }
  }

  /** `--sglang-mem-fraction-static 0.8` -> server arg `mem_fraction_static: 0.8`, for every flag of a family. */
  passthrough(prefix: string, skip: ReadonlySet<string> = new Set()): Record<string, ServerArgValue> {
    const out: Record<string, ServerArgValue> = {};
    for (const [name, value] of this.values) {
      if (!name.startsWith(prefix)) continue;
      const field = name.slice(prefix.length);
      if (skip.has(field)) continue;
      out[field.replaceAll('-', '_')] = scalar(value);
    }
    return out;
  }
}

/** A flag's text as the server-arg value SGLang's own parser would produce. */
export function scalar(value: FlagValue): ServerArgValue {
  if (typeof value === 'boolean') return value;
  if (Array.isArray(value)) return value.join(',');
  if (value === 'true') return true;
  if (value === 'false') return false;
  if (value !== '' && /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(value)) return Number(value);
  return value;
}
