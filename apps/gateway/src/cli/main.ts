// The `uis` CLI: wiring only. Each command lives in its own file and registers itself here.
import { Command } from 'commander';
import pkg from '../../package.json' with { type: 'json' };
import { registerAdminCommand } from './admin-command.ts';
import { cliFailure } from './cli-errors.ts';
import { registerDemoCommand } from './demo-command.ts';
import { registerPlanCommand } from './plan-command.ts';
import { registerServeCommand } from './serve-command.ts';

const program = new Command('uis')
  .description('Unified Inference Service: placement planning and control of SGLang inference roles')
  .version(pkg.version, '-V, --version', 'print the version of uis')
  // Every error is printed once, below, in the CLI's one shape (path, message, code); unusable input exits 2.
  .exitOverride()
  .configureOutput({ outputError: () => undefined });

registerPlanCommand(program);
registerServeCommand(program);
registerDemoCommand(program);
registerAdminCommand(program);

// The command an error belongs to: the one whose action ran, else the one named on the command line.
let command = program.commands.some((c) => c.name() === process.argv[2]) ? `uis ${process.argv[2]}` : 'uis';
program.hook('preAction', (_program, action) => {
  command = `uis ${action.name()}`;
});

try {
  await program.parseAsync(process.argv);
} catch (e) {
  const { text, exitCode } = cliFailure(command, e);
  process.stderr.write(text);
  process.exitCode = exitCode;
  // The command is over: nothing left behind it (a timer, a socket) may keep a failed `uis` alive, where a
  // supervisor would take it for a running service and never restart it.
  setTimeout(() => process.exit(exitCode), 2000).unref();
}
