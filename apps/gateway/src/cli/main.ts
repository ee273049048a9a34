// The `uis` CLI: wiring only. Each command lives in its own file and registers itself here.
import { Command, CommanderError } from 'commander';
import { registerDemoCommand } from './demo-command.ts';
import { registerPlanCommand } from './plan-command.ts';
import { registerServeCommand } from './serve-command.ts';

const program = new Command('uis')
  .description('Unified Inference Service: placement planning and control of SGLang inference roles')
  // Unusable input (unknown option, missing argument) exits 2, like every other input error of the CLI.
  .exitOverride();

registerPlanCommand(program);
registerServeCommand(program);
registerDemoCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CommanderError) {
    process.exitCode = e.exitCode === 0 ? 0 : 2;
  } else {
    process.stderr.write(`uis: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 2;
  }
}
