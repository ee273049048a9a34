import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import {
  isUisError,
  type LauncherKind,
  loadConfig,
  type PathIssue,
  type UisConfig,
  UisError,
} from '@uis/spec';
import { type Command, InvalidArgumentError } from 'commander';
import { EXIT_INVALID_LAYOUT, renderIssues } from './cli-errors.ts';
import { readInputFile } from './input-file.ts';

/** Decimal digits only: `Number()` would also take '' (port 0, a random port), '0x50', '1e3' and ' 80'. */
export function parsePort(value: string): number {
  const n = /^\d{1,5}$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 0 && n <= 65535)) throw new InvalidArgumentError('must be a port (0-65535)');
  return n;
}

/** An empty host would make Node listen on every interface, the opposite of the loopback default. */
export function parseHost(value: string): string {
  if (value === '' || /\s/.test(value))
    throw new InvalidArgumentError('must be an address or host name, e.g. 127.0.0.1 or 0.0.0.0');
  return value;
}

export function parseLauncher(value: string): LauncherKind {
  if (value === 'sim' || value === 'local' || value === 'external' || value === 'ray') return value;
  throw new InvalidArgumentError('must be sim, local, external or ray');
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export function parseLogLevel(value: string): string {
  if (!LOG_LEVELS.includes(value)) throw new InvalidArgumentError(`must be one of ${LOG_LEVELS.join(', ')}`);
  return value;
}

/** Seconds (decimal) to milliseconds; 0, negatives and words are refused. */
export function parseSeconds(value: string): number {
  const n = /^\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN;
  if (!(n > 0)) throw new InvalidArgumentError('must be a number of seconds greater than 0, e.g. 1200');
  return Math.round(n * 1000);
}

/** The options serve and demo share: how the terminal shows logs and how long an engine may take to start. */
export function addRunOptions(command: Command): Command {
  return command
    .option(
      '--log-level <level>',
      'trace | debug | info | warn | error | fatal | silent (default: info)',
      parseLogLevel,
    )
    .option(
      '--start-deadline <seconds>',
      'how long one engine may take to load and answer /health before its start fails (default: 600)',
      parseSeconds,
    );
}

/** Reads and validates a config file; problems are UisErrors at `--config` or at their config path (exit 2). */
export function readConfig(file: string): UisConfig {
  const path = resolve(process.cwd(), file);
  return loadConfig(
    readInputFile(path, '--config', (p) => readFileSync(p, 'utf8')),
    file,
  );
}

/** Why `path` cannot be written (`read-only file system`, `permission denied`, ...), or null when it can. */
function unwritable(path: string): string | null {
  try {
    accessSync(path, constants.R_OK | constants.W_OK);
    return null;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EROFS') return 'read-only file system';
    if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
    return code ?? String(e);
  }
}

/** The SQLite file must be creatable and writable before any engine starts (with its `-wal` and `-shm` files beside
 * it): `flag` is where it came from. */
export function checkDbPath(dbPath: string, flag: string): void {
  if (dbPath === ':memory:') return;
  const path = resolve(process.cwd(), dbPath);
  const fail = (message: string) => {
    throw new UisError({ code: 'invalid_db_path', path: flag, message });
  };
  const stat = (p: string) => statSync(p, { throwIfNoEntry: false });
  if (stat(path)?.isDirectory()) fail(`${path} is a directory; give the path of a database file`);
  if (!stat(dirname(path))?.isDirectory())
    fail(`directory ${dirname(path)} does not exist; create it or choose another path`);
  const file = stat(path) === undefined ? null : unwritable(path);
  if (file !== null) fail(`${path} cannot be written: ${file}; choose a writable path`);
  const dir = unwritable(dirname(path));
  if (dir !== null)
    fail(
      `directory ${dirname(path)} cannot be written: ${dir} (the database keeps its -wal and -shm files beside it); choose a writable path`,
    );
}

/** Runs a server command; an invalid layout exits 1 with one violation per line, as `uis plan` does. */
export async function withLayoutExit(run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (e) {
    if (!isUisError(e) || e.code !== 'invalid_layout') throw e;
    const violations = Array.isArray(e.details) ? (e.details as PathIssue[]) : [];
    process.stderr.write(renderIssues('uis: invalid layout, nothing was started:', violations));
    process.exitCode = EXIT_INVALID_LAYOUT;
  }
}

/** `uis serve --config FILE`: the managers and role gateways of a config, with the console at `/`. */
export function registerServeCommand(program: Command): void {
  const serve = program
    .command('serve')
    .description('start the managers and role gateways of a config file and serve the console')
    .requiredOption('--config <file>', 'a UIS config file (YAML or JSON)')
    .option('--port <port>', 'listen port (default: gateway.port of the config, else 8080)', parsePort)
    .option(
      '--host <host>',
      'listen address (default: gateway.host of the config, else 127.0.0.1)',
      parseHost,
    )
    .option(
      '--launcher <kind>',
      'engine launcher: sim | local | external | ray (default: gateway.launcher; ray reads gateway.ray)',
      parseLauncher,
    )
    .option('--db <path>', 'SQLite file for events, operations and batches (default: gateway.db_path)')
    .option(
      '--adopt-engines',
      'keep engines running if uis dies and adopt them on the next start with the same --db (gateway.adopt_engines; sim and local launchers)',
    );
  addRunOptions(serve).action(
    async (o: {
      config: string;
      port?: number;
      host?: string;
      launcher?: LauncherKind;
      db?: string;
      adoptEngines?: boolean;
      logLevel?: string;
      startDeadline?: number;
    }) => {
      const config = readConfig(o.config);
      // Errors name where the value came from: the flag, else the config's gateway block.
      const source = (given: boolean, field: 'port' | 'host') =>
        given || config.gateway === undefined ? `--${field}` : `gateway.${field}`;
      checkDbPath(
        o.db ?? config.gateway?.db_path ?? ':memory:',
        o.db === undefined ? 'gateway.db_path' : '--db',
      );
      // Loaded here, not at the top: `uis plan` and `uis --version` should not pay for the server's modules.
      const { runServer } = await import('./run-server.ts');
      await withLayoutExit(() =>
        runServer({
          config,
          title: 'uis serve',
          launcher: o.launcher ?? config.gateway?.launcher ?? 'sim',
          port: o.port ?? config.gateway?.port ?? 8080,
          host: o.host ?? config.gateway?.host ?? '127.0.0.1',
          listenPaths: {
            port: source(o.port !== undefined, 'port'),
            host: source(o.host !== undefined, 'host'),
          },
          ...(o.db === undefined ? {} : { dbPath: o.db }),
          ...(o.adoptEngines ? { adoptEngines: true } : {}),
          ...(o.logLevel === undefined ? {} : { logLevel: o.logLevel }),
          ...(o.startDeadline === undefined ? {} : { startDeadlineMs: o.startDeadline }),
        }),
      );
    },
  );
}
