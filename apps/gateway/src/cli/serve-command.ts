import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { isUisError, loadConfig, type UisConfig } from '@uis/spec';
import { type Command, InvalidArgumentError } from 'commander';
import type { LauncherKind } from '../service/uis-service.ts';
import { runServer } from './run-server.ts';

export function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port (0-65535)');
  return n;
}

export function parseLauncher(value: string): LauncherKind {
  if (value === 'sim' || value === 'local' || value === 'external' || value === 'ray') return value;
  throw new InvalidArgumentError('must be sim, local, external or ray');
}

/** Reads and validates a config file; problems are printed with their paths and exit 2. */
export function readConfig(file: string): UisConfig {
  const path = resolve(process.cwd(), file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
  return loadConfig(text, file);
}

/** Runs a server command; an invalid layout exits 1 with one violation per line, as `uis plan` does. */
export async function withLayoutExit(run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (e) {
    if (!isUisError(e) || e.code !== 'invalid_layout') throw e;
    const violations = Array.isArray(e.details)
      ? (e.details as Array<{ code: string; path: string; message: string }>)
      : [];
    process.stderr.write(
      `uis: invalid layout, nothing was started:\n${violations.map((v) => `  ${v.path}: ${v.message} [${v.code}]`).join('\n')}\n`,
    );
    process.exitCode = 1;
  }
}

/** `uis serve --config FILE`: the managers and role gateways of a config, with the console at `/`. */
export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description('start the managers and role gateways of a config file and serve the console')
    .requiredOption('--config <file>', 'a UIS config file (YAML or JSON)')
    .option('--port <port>', 'listen port (default: gateway.port of the config, else 8080)', parsePort)
    .option('--host <host>', 'listen address (default: gateway.host of the config, else 127.0.0.1)')
    .option(
      '--launcher <kind>',
      'engine launcher: sim | local | external | ray (default: gateway.launcher; ray reads gateway.ray)',
      parseLauncher,
    )
    .option('--db <path>', 'SQLite file for events, operations and batches (default: gateway.db_path)')
    .action(
      async (o: { config: string; port?: number; host?: string; launcher?: LauncherKind; db?: string }) => {
        const config = readConfig(o.config);
        await withLayoutExit(() =>
          runServer({
            config,
            title: 'uis serve',
            launcher: o.launcher ?? config.gateway?.launcher ?? 'sim',
            port: o.port ?? config.gateway?.port ?? 8080,
            host: o.host ?? config.gateway?.host ?? '127.0.0.1',
            ...(o.db === undefined ? {} : { dbPath: o.db }),
          }),
        );
      },
    );
}
