import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { REPO } from './repo.ts';

/** A function as the parser found it: where it starts, how many lines it spans (first to last, inclusive), and
 * its name (`constructor`, a method's or a variable's name, or `(anonymous)`). */
export interface FunctionSpan {
  file: string;
  line: number;
  lines: number;
  name: string;
}

interface Diagnostic {
  category: string;
  location: { path: string; start: { line: number; column: number }; end: { line: number } };
}

const RULE = 'lint/complexity/noExcessiveLinesPerFunction';

/** Biome's function rule with a limit of one line: biome's parser reports every function of two lines or more
 * (declarations, expressions, arrows, methods, constructors) with its range; we measure the range ourselves, so the
 * length is the lines a reader sees, comments and blank lines included. */
const CONFIG = {
  root: true,
  vcs: { enabled: false },
  files: { includes: ['**'] },
  formatter: { enabled: false },
  assist: { enabled: false },
  linter: {
    enabled: true,
    rules: {
      preset: 'none',
      complexity: { noExcessiveLinesPerFunction: { level: 'error', options: { maxLines: 1 } } },
    },
  },
};

function biomeBin(): string {
  const pkg = createRequire(import.meta.url).resolve('@biomejs/biome/package.json');
  return join(dirname(pkg), 'bin', 'biome');
}

/** Every function of `files` (paths relative to `cwd`) spanning two lines or more. */
export function functionSpans(
  files: readonly string[],
  cwd = REPO,
  text: (f: string) => string,
): FunctionSpan[] {
  const dir = mkdtempSync(join(tmpdir(), 'uis-function-spans-'));
  try {
    writeFileSync(join(dir, 'biome.json'), JSON.stringify(CONFIG));
    let out: string;
    try {
      out = execFileSync(
        process.execPath,
        [biomeBin(), 'lint', `--config-path=${dir}`, '--reporter=json', '--max-diagnostics=none', ...files],
        { cwd, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, stdio: ['ignore', 'pipe', 'ignore'] },
      );
    } catch (e) {
      // Biome exits 1 when it reports anything, which it always does here.
      out = (e as { stdout?: string }).stdout ?? '';
    }
    const report = JSON.parse(out) as { diagnostics: Diagnostic[] };
    const lines = new Map<string, string[]>();
    return report.diagnostics
      .filter((d) => d.category === RULE)
      .map((d) => {
        const { path, start, end } = d.location;
        if (!lines.has(path)) lines.set(path, text(path).split('\n'));
        const source = lines.get(path)?.[start.line - 1] ?? '';
        return {
          file: path,
          line: start.line,
          lines: end.line - start.line + 1,
          name: nameAt(source, start.column),
        };
      });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const MODIFIERS =
  /^(?:(?:export|default|public|private|protected|static|async|override|readonly|get|set)\s+|\*\s*)*/;

/** The name of the function starting at `column` (1-based) of `line`. */
export function nameAt(line: string, column: number): string {
  const from = line.slice(column - 1);
  const declared = /^function\s*\*?\s*([\w$]+)/.exec(from.replace(MODIFIERS, ''));
  if (declared) return declared[1] as string;
  if (/^(?:async\s+)?function\b/.test(from) || /^(?:async\s*)?(?:\(|[\w$]+\s*=>)/.test(from)) {
    // An expression or arrow: named by what it is assigned to (`const x =`, `x:`, `x =`), if anything.
    const before = /([#\w$]+)\s*(?::\s*[^=]*)?[=:]\s*$/.exec(line.slice(0, column - 1).replace(/\s*$/, ' '));
    return before ? (before[1] as string) : '(anonymous)';
  }
  const method = /^([#\w$]+)\s*[<(]/.exec(from.replace(MODIFIERS, ''));
  return method ? (method[1] as string) : '(anonymous)';
}
