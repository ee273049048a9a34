import { ArgparseError, parseSimArgs } from './options.ts';
import { startSimServer } from './server.ts';

/** `sglang-sim [SGLang launch flags] [--sim-* flags]`: one node of a simulated engine; exits 0 on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  let parsed: ReturnType<typeof parseSimArgs>;
  try {
    parsed = parseSimArgs(process.argv.slice(2));
  } catch (e) {
    // SGLang's own refusal reads as SGLang prints it; the simulator's other complaints say who is speaking.
    process.stderr.write(
      e instanceof ArgparseError ? `${e.message}\n` : `sglang-sim: ${(e as Error).message}\n`,
    );
    process.exit(2);
  }
  for (const w of parsed.warnings) process.stderr.write(`[sglang-sim] WARNING: ${w}\n`);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const server = await startSimServer(parsed.options, {
    log,
    onCrash: (reason) => {
      log(`[sglang-sim] fatal: ${reason}`);
      process.exit(1);
    },
  });
  const stop = () => {
    void server.close().then(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e: unknown) => {
  process.stderr.write(`sglang-sim: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
