import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, isErrorCode, RELAYED_STATUS_CODES, statusOf } from './error-codes.ts';
import { UisError } from './errors.ts';

const repo = fileURLToPath(new URL('../../..', import.meta.url));

/** Where a code is written in source: an error's or issue's `code: '…'`, a comparison with a `.code`, the first
 * argument of the helpers that make an error or an issue from a code, a code in a `[code, …]` tuple. */
const CODE_SITES: RegExp[] = [
  /\bcode:\s*'([a-z][a-z0-9_]*)'/g,
  /(?<!typeof\s+[\w.]*)\.code\s*[!=]==\s*'([a-z][a-z0-9_]*)'/g,
  /\b(?:fail|bridgeError|configError|isEngineError\([^,()]+,)\(?\s*'([a-z][a-z0-9_]*)'/g,
  /\b(?:zodError|parseOrThrow)\([^;]*?,\s*'[^']*',\s*'([a-z][a-z0-9_]*)'\)/g,
  /^\s*(?:\?|:)?\s*\[\s*'([a-z]+_[a-z0-9_]+)',/gm,
];

/** zod's own issue codes, written to make (`ctx.addIssue`) or read (config.ts) a zod issue: not ours;
 * `issueCode` turns them into ours (`invalid_custom`, `unknown_field`) before they reach the wire. */
const NOT_OURS = new Set(['custom', 'unrecognized_keys']);

function codesIn(text: string): string[] {
  const found = new Set<string>();
  for (const re of CODE_SITES) for (const m of text.matchAll(re)) if (m[1] !== undefined) found.add(m[1]);
  return [...found].filter((c) => !NOT_OURS.has(c));
}

/** Product source: every tracked .ts/.tsx under packages/ and apps/ but tests, test helpers and the simulator
 * (sglang-sim speaks SGLang's own error shape, not ours). */
function productFiles(): string[] {
  const out = execFileSync('git', ['ls-files', 'packages', 'apps'], { cwd: repo, encoding: 'utf8' });
  return out
    .split('\n')
    .filter((f) => /\.tsx?$/.test(f) && !/\.test\.tsx?$|\.test-util\.ts$|test-helpers|\/testing\//.test(f))
    .filter((f) => !f.startsWith('packages/sglang-sim/') && !f.includes('/bench/') && !f.endsWith('.d.ts'));
}

describe('the error-code table', () => {
  it('holds every code the product source uses', () => {
    const unknown: string[] = [];
    let seen = 0;
    for (const file of productFiles()) {
      for (const code of codesIn(readFileSync(join(repo, file), 'utf8'))) {
        seen += 1;
        if (!isErrorCode(code)) unknown.push(`${file}: ${code}`);
      }
    }
    expect(unknown).toEqual([]);
    // The scan itself works: the product writes well over a hundred codes.
    expect(seen).toBeGreaterThan(150);
  });

  it('holds every code the Ray bridge (Python) answers with', () => {
    const py = readFileSync(join(repo, 'packages/manager/python/uis_ray_bridge.py'), 'utf8');
    const codes = [...py.matchAll(/(?:BridgeError\(|"code": )"([a-z_]+)"/g)].map((m) => m[1] ?? '');
    expect(codes.length).toBeGreaterThan(5);
    expect(codes.filter((c) => !isErrorCode(c))).toEqual([]);
  });

  it('finds a code that is not in the table, wherever it is written', () => {
    const text = [
      "throw new UisError({ code: 'made_up_one', message: 'x' });",
      "if (e.code === 'made_up_two') return;",
      "fail('made_up_three', path, 'm');",
      "parseOrThrow(Schema, body, 'body', 'made_up_four');",
      "      ? ['made_up_five', 'reason']",
      "ctx.addIssue({ code: 'custom', message: 'zod' });",
    ].join('\n');
    expect(codesIn(text).sort()).toEqual([
      'made_up_five',
      'made_up_four',
      'made_up_one',
      'made_up_three',
      'made_up_two',
    ]);
    expect(codesIn(text).filter((c) => !isErrorCode(c))).toHaveLength(5);
  });

  it('gives every code an error status and a snake_case name', () => {
    for (const [code, status] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^[a-z][a-z0-9]*(_[a-z0-9]+)*$/);
      expect(status >= 400 && status < 600, `${code}: ${status}`).toBe(true);
    }
  });

  it('resolves the codes that used to have two statuses', () => {
    expect({
      unknown_model: statusOf('unknown_model'),
      unknown_role: statusOf('unknown_role'),
      unknown_engine: statusOf('unknown_engine'),
      static_model: statusOf('static_model'),
      static_model_dcs: statusOf('static_model_dcs'),
      duplicate_sample: statusOf('duplicate_sample'),
      sample_exists: statusOf('sample_exists'),
      launch_failed: statusOf('launch_failed'),
      invalid_launch_spec: statusOf('invalid_launch_spec'),
    }).toEqual({
      unknown_model: 404,
      unknown_role: 404,
      unknown_engine: 404,
      static_model: 409,
      static_model_dcs: 400,
      duplicate_sample: 400,
      sample_exists: 409,
      launch_failed: 500,
      invalid_launch_spec: 400,
    });
  });
});

describe('UisError', () => {
  it('takes its status from the table', () => {
    expect(new UisError({ code: 'unknown_model', message: 'm' }).status).toBe(404);
    expect(new UisError({ code: 'service_stopping', message: 'm' }).status).toBe(503);
  });

  it('passes on a relayed status only for a relayed code', () => {
    expect([...RELAYED_STATUS_CODES].every((c) => isErrorCode(c))).toBe(true);
    expect(new UisError({ code: 'engine_http_error', relayedStatus: 422, message: 'm' }).status).toBe(422);
    expect(new UisError({ code: 'start_failed', relayedStatus: 409, message: 'm' }).status).toBe(409);
    expect(new UisError({ code: 'start_failed', relayedStatus: 200, message: 'm' }).status).toBe(500);
    expect(new UisError({ code: 'unknown_model', relayedStatus: 422, message: 'm' }).status).toBe(404);
  });
});
