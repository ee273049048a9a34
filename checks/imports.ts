import { LanguageVariant, SyntaxKind } from 'typescript/unstable/ast';
import { createScanner } from 'typescript/unstable/ast/scanner';

/** Tokens after which a `/` divides (anything else starts a regular expression). */
const ENDS_EXPRESSION = new Set<SyntaxKind>([
  SyntaxKind.Identifier,
  SyntaxKind.PrivateIdentifier,
  SyntaxKind.NumericLiteral,
  SyntaxKind.BigIntLiteral,
  SyntaxKind.StringLiteral,
  SyntaxKind.NoSubstitutionTemplateLiteral,
  SyntaxKind.TemplateTail,
  SyntaxKind.RegularExpressionLiteral,
  SyntaxKind.CloseParenToken,
  SyntaxKind.CloseBracketToken,
  SyntaxKind.CloseBraceToken,
  SyntaxKind.ThisKeyword,
  SyntaxKind.SuperKeyword,
  SyntaxKind.TrueKeyword,
  SyntaxKind.FalseKeyword,
  SyntaxKind.NullKeyword,
  SyntaxKind.PlusPlusToken,
  SyntaxKind.MinusMinusToken,
]);

/**
 * The module specifiers a TypeScript or JavaScript file names, read with TypeScript's own scanner (comments and
 * string contents never count): `import … from 'x'`, `export … from 'x'`, `import 'x'`, `import('x')`,
 * `require('x')` (and `import x = require('x')`). Type-only imports count: the package must be there to type-check.
 */
/** A module a file names, and whether only types come from it (`import type` / `export type`). */
export interface ModuleRef {
  specifier: string;
  typeOnly: boolean;
}

export function moduleSpecifiers(text: string, jsx: boolean): ModuleRef[] {
  const scanner = createScanner(true, jsx ? LanguageVariant.JSX : LanguageVariant.Standard, text);
  const tokens: Array<{ kind: SyntaxKind; value: string }> = [];
  /** Open braces: true for a template's `${`, so its `}` resumes the template. */
  const braces: boolean[] = [];
  let prev: SyntaxKind = SyntaxKind.Unknown;
  for (let kind = scanner.scan(); kind !== SyntaxKind.EndOfFile; kind = scanner.scan()) {
    if (kind === SyntaxKind.SlashToken || kind === SyntaxKind.SlashEqualsToken) {
      if (!ENDS_EXPRESSION.has(prev)) kind = scanner.reScanSlashToken();
    } else if (kind === SyntaxKind.TemplateHead || kind === SyntaxKind.OpenBraceToken) {
      braces.push(kind === SyntaxKind.TemplateHead);
    } else if (kind === SyntaxKind.CloseBraceToken && braces.pop() === true) {
      kind = scanner.reScanTemplateToken(false);
      if (kind === SyntaxKind.TemplateMiddle) braces.push(true);
    }
    const named = kind === SyntaxKind.StringLiteral || kind === SyntaxKind.Identifier;
    tokens.push({ kind, value: named ? scanner.getTokenValue() : '' });
    prev = kind;
  }
  const out: ModuleRef[] = [];
  /** Inside an `import type …` / `export type …` statement, until its `from`. */
  let typeOnly = false;
  tokens.forEach((t, i) => {
    const before = tokens[i - 1]?.kind;
    const next = tokens[i + 1];
    const after = tokens[i + 2];
    if (
      (t.kind === SyntaxKind.ImportKeyword || t.kind === SyntaxKind.ExportKeyword) &&
      next?.kind === SyntaxKind.TypeKeyword &&
      after?.kind !== SyntaxKind.FromKeyword &&
      after?.kind !== SyntaxKind.EqualsToken
    )
      typeOnly = true;
    if (before === SyntaxKind.DotToken) return;
    if (t.kind === SyntaxKind.FromKeyword && next?.kind === SyntaxKind.StringLiteral) {
      out.push({ specifier: next.value, typeOnly });
      typeOnly = false;
    } else if (t.kind === SyntaxKind.ImportKeyword && next?.kind === SyntaxKind.StringLiteral)
      out.push({ specifier: next.value, typeOnly: false });
    else if (
      (t.kind === SyntaxKind.ImportKeyword || t.kind === SyntaxKind.RequireKeyword) &&
      next?.kind === SyntaxKind.OpenParenToken &&
      after?.kind === SyntaxKind.StringLiteral
    )
      out.push({ specifier: after.value, typeOnly: false });
    else {
      const named = resolved(tokens, i);
      if (named !== undefined) out.push({ specifier: named, typeOnly: false });
    }
  });
  return out;
}

/** The package named by `require.resolve('x')` or `import.meta.resolve('x')` at token `i`: it must be installed as
 * much as an imported one. */
function resolved(tokens: ReadonlyArray<{ kind: SyntaxKind; value: string }>, i: number): string | undefined {
  const at = (j: number, kind: SyntaxKind, value?: string) =>
    tokens[i + j]?.kind === kind && (value === undefined || tokens[i + j]?.value === value);
  const call = (j: number) =>
    at(j, SyntaxKind.Identifier, 'resolve') &&
    at(j + 1, SyntaxKind.OpenParenToken) &&
    at(j + 2, SyntaxKind.StringLiteral)
      ? tokens[i + j + 2]?.value
      : undefined;
  if (at(0, SyntaxKind.RequireKeyword) && at(1, SyntaxKind.DotToken)) return call(2);
  if (at(0, SyntaxKind.Identifier, 'createRequire') && at(1, SyntaxKind.OpenParenToken)) {
    // createRequire(…).resolve('x'): skip to the call's closing parenthesis.
    let depth = 0;
    for (let j = 1; i + j < tokens.length; j++) {
      const kind = tokens[i + j]?.kind;
      if (kind === SyntaxKind.OpenParenToken) depth++;
      else if (kind === SyntaxKind.CloseParenToken && --depth === 0)
        return at(j + 1, SyntaxKind.DotToken) ? call(j + 2) : undefined;
    }
  }
  if (
    at(0, SyntaxKind.ImportKeyword) &&
    at(1, SyntaxKind.DotToken) &&
    at(2, SyntaxKind.Identifier, 'meta') &&
    at(3, SyntaxKind.DotToken)
  )
    return call(4);
  return undefined;
}
