import { type ErrorCode, errorIssues, isErrorCode, isUisError, type PathIssue } from '@uis/spec';
import { CommanderError } from 'commander';

/** Exit codes of every `uis` command: 0 done, 1 invalid layout, 2 unusable input (or a start that failed). */
export const EXIT_OK = 0;
export const EXIT_INVALID_LAYOUT = 1;
export const EXIT_BAD_INPUT = 2;

/** The one shape of a CLI error on stderr: a headline, then `  path: message [code]` per issue. */
export function renderIssues(headline: string, issues: readonly PathIssue[]): string {
  return `${headline}\n${issues.map((i) => `  ${i.path}: ${i.message} [${i.code}]`).join('\n')}\n`;
}

/** `commander.unknownOption` -> `unknown_option`: the codes stay those of commander, in our spelling (one the
 * table does not know yet reads as `usage`). */
function commanderCode(code: string): ErrorCode {
  const ours = code.replace(/^commander\./, '').replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  return isErrorCode(ours) ? ours : 'usage';
}

/** A commander parse error as an issue at the flag it names (`--port`), else at the command. */
export function commanderIssue(e: CommanderError, command: string): PathIssue {
  // `option '--port <port>' argument 'abc' is invalid. must be ...` -> `"abc" is invalid: must be ...`
  const message = e.message
    .replace(/^error: /, '')
    // The suggestion (`(Did you mean --port?)`) comes on a line of its own: one issue is one line.
    .replace(/\s*\n\s*/g, ' ')
    .replace(
      /^option '[^']+' argument '(.*)' is invalid\. /s,
      (_m, value: string) => `${JSON.stringify(value)} is invalid: `,
    );
  const flag = /'(--?[A-Za-z][\w-]*)/.exec(e.message)?.[1];
  const unknownCommand = e.code === 'commander.unknownCommand' ? /'([^']+)'/.exec(message)?.[1] : undefined;
  return {
    code: commanderCode(e.code),
    path: flag ?? (unknownCommand === undefined ? command : `uis ${unknownCommand}`),
    message,
  };
}

/** What the CLI prints for an error that ended a command, and its exit code. Help and version are not errors. */
export function cliFailure(command: string, e: unknown): { text: string; exitCode: number } {
  if (e instanceof CommanderError) {
    // Help was printed by commander already; asked for, it exits 0, shown because no command was given, 2.
    if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help')
      return { text: '', exitCode: e.exitCode === 0 ? EXIT_OK : EXIT_BAD_INPUT };
    return {
      text: renderIssues(`${command}: unusable input`, [commanderIssue(e, command)]),
      exitCode: EXIT_BAD_INPUT,
    };
  }
  const input = isUisError(e) && e.status < 500;
  return {
    text: renderIssues(`${command}: ${input ? 'unusable input' : 'failed'}`, errorIssues(e, command)),
    exitCode: EXIT_BAD_INPUT,
  };
}
