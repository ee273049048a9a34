// The `uis` CLI: wiring only. Each command lives in its own file and registers itself here. Only the command named
// on the command line is loaded (all of them for help or an unknown name): `uis --version` and `uis plan` start
// without reading the server's modules (the cold-start bench, bench/cold-start.bench.ts, measures it).
import { Command, CommanderError } from 'commander';
import pkg from '../../package.json' with { type: 'json' };

type Register = (program: Command) => void;

const COMMANDS: Record<string, () => Promise<Register>> = {
  plan: async () => (await import('./plan-command.ts')).registerPlanCommand,
  serve: async () => (await import('./serve-command.ts')).registerServeCommand,
  demo: async () => (await import('./demo-command.ts')).registerDemoCommand,
  admin: async () => (await import('./admin-command.ts')).registerAdminCommand,
};

const program = new Command('uis')
  .description('Unified Inference Service: placement planning and control of SGLang inference roles')
  .version(pkg.version, '-V, --version', 'print the version of uis')
  // Every error is printed once, below, in the CLI's one shape (path, message, code); unusable input exits 2.
  .exitOverride()
  .configureOutput({ outputError: () => undefined });

const named = process.argv[2] ?? '';
const load = Object.hasOwn(COMMANDS, named)
  ? [named]
  : named === '-V' || named === '--version'
    ? []
    : Object.keys(COMMANDS);
for (const register of await Promise.all(load.map((name) => COMMANDS[name]?.()))) register?.(program);

// The command an error belongs to: the one whose action ran, else the one named on the command line.
let command = Object.hasOwn(COMMANDS, named) ? `uis ${named}` : 'uis';
program.hook('preAction', (_program, action) => {
  command = `uis ${action.name()}`;
});

/** Prints the error in the CLI's one shape and ends the process with its exit code. */
async function fail(e: unknown): Promise<void> {
  const { cliFailure } = await import('./cli-errors.ts');
  const { text, exitCode } = cliFailure(command, e);
  process.stderr.write(text);
  process.exitCode = exitCode;
  // The command is over: nothing left behind it (a timer, a socket) may keep a failed `uis` alive, where a
  // supervisor would take it for a running service and never restart it.
  setTimeout(() => process.exit(exitCode), 2000).unref();
}

try {
  await program.parseAsync(process.argv);
} catch (e) {
  // Help or the version asked for was printed already: not an error (cli-errors, and @uis/spec, stay unloaded).
  if (!(e instanceof CommanderError && e.exitCode === 0)) await fail(e);
}
