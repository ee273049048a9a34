import { type CommandRoute, commandRoutes, type Permission } from '@uis/control-plane';
import { isErrorCode, UisError } from '@uis/spec';
import type { Command } from 'commander';

export interface AdminCallOptions {
  url: string;
  /** The bearer token; none for a public command. */
  token: string | undefined;
  /** `key=value` arguments: path parameters and input fields (values that parse as JSON are taken as JSON). */
  args: readonly string[];
  /** The whole input as JSON (fields given as `key=value` are added to it). */
  input?: string;
  idempotencyKey?: string;
  fetch?: typeof fetch;
}

/** `key=value` -> [key, value]; the value is JSON when it parses as JSON (numbers, booleans, arrays), else text. */
function field(arg: string): [string, unknown] {
  const at = arg.indexOf('=');
  if (at <= 0)
    throw new UisError({
      code: 'usage',
      path: arg,
      message: `expected key=value, got ${JSON.stringify(arg)}`,
    });
  const raw = arg.slice(at + 1);
  try {
    return [arg.slice(0, at), JSON.parse(raw)];
  } catch {
    return [arg.slice(0, at), raw];
  }
}

/** The HTTP request of one command call: path parameters filled in, the rest as query (GET) or JSON body (POST). */
export function adminRequest(
  route: CommandRoute,
  opts: AdminCallOptions,
): { url: string; init: RequestInit } {
  const given: Record<string, unknown> = opts.input === undefined ? {} : JSON.parse(opts.input);
  for (const a of opts.args) {
    const [k, v] = field(a);
    given[k] = v;
  }
  let path = route.path;
  for (const p of route.params) {
    const v = given[p];
    if (v === undefined)
      throw new UisError({ code: 'usage', path: p, message: `${route.name} needs ${p}=...` });
    path = path.replace(`{${p}}`, encodeURIComponent(String(v)));
    delete given[p];
  }
  const headers: Record<string, string> = { 'x-uis-actor': 'cli' };
  if (opts.token !== undefined && opts.token !== '') headers.authorization = `Bearer ${opts.token}`;
  if (opts.idempotencyKey !== undefined) headers['idempotency-key'] = opts.idempotencyKey;
  const base = opts.url.replace(/\/+$/, '');
  if (route.method === 'GET') {
    const q = new URLSearchParams(
      Object.fromEntries(Object.entries(given).map(([k, v]) => [k, String(v)])),
    ).toString();
    return { url: `${base}${path}${q ? `?${q}` : ''}`, init: { method: 'GET', headers } };
  }
  headers['content-type'] = 'application/json';
  return { url: `${base}${path}`, init: { method: 'POST', headers, body: JSON.stringify(given) } };
}

/** The token the CLI sends for a command: `--token` when given, else the least one its permission takes from the
 * environment (a read: UIS_SERVING_TOKEN, else UIS_ADMIN_TOKEN; a mutation: UIS_ADMIN_TOKEN; public: none). The
 * service decides (the table's permission); this only picks what to show it. */
export function tokenFor(
  permission: Permission,
  explicit: string | undefined,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  if (explicit !== undefined) return explicit;
  if (permission === 'public') return undefined;
  if (permission === 'serving') return env.UIS_SERVING_TOKEN ?? env.UIS_ADMIN_TOKEN;
  return env.UIS_ADMIN_TOKEN;
}

/** Runs one command against a running service; prints the answer's JSON. A refusal is thrown as its UisError. */
export async function callAdmin(name: string, opts: AdminCallOptions): Promise<unknown> {
  const route = commandRoutes().find((r) => r.name === name);
  if (!route)
    throw new UisError({
      code: 'usage',
      path: 'command',
      message: `no command ${JSON.stringify(name)}; commands: ${commandRoutes()
        .map((r) => r.name)
        .join(', ')}`,
    });
  const { url, init } = adminRequest(route, opts);
  const res = await (opts.fetch ?? fetch)(url, init);
  const body = (await res.json()) as { error?: { code: string; message: string; path?: string } };
  const err = body.error;
  if (!res.ok && err)
    throw new UisError({
      code: isErrorCode(err.code) ? err.code : 'internal_error',
      message: err.message,
      ...(err.path === undefined ? {} : { path: err.path }),
    });
  return body;
}

/** `uis admin <command> [key=value ...]`: every operator command of the table, over the admin API. */
export function registerAdminCommand(program: Command): void {
  program
    .command('admin')
    .description('run an operator command against a running service (uis admin --list shows them)')
    .argument('[command]', 'command name, e.g. drain_model')
    .argument('[fields...]', 'path parameters and input fields as key=value (JSON values are parsed)')
    .option('--url <url>', 'the service', process.env.UIS_URL ?? 'http://127.0.0.1:8080')
    .option(
      '--token <token>',
      "bearer token (default: the command's permission picks UIS_ADMIN_TOKEN, or UIS_SERVING_TOKEN for reads)",
    )
    .option('--input <json>', 'the whole input as a JSON object')
    .option('--idempotency-key <id>', 'operation id: a retry with the same id answers the first result')
    .option('--list', 'list the commands with their method and path')
    .action(
      async (
        name: string | undefined,
        fields: string[],
        o: { url: string; token?: string; input?: string; idempotencyKey?: string; list?: boolean },
      ) => {
        if (o.list || name === undefined) {
          for (const r of commandRoutes())
            process.stdout.write(
              `${r.name.padEnd(20)} ${r.method.padEnd(5)} ${r.permission.padEnd(8)} ${r.path}   ${r.summary}\n`,
            );
          return;
        }
        const answer = await callAdmin(name, {
          url: o.url,
          token: tokenFor(commandRoutes().find((r) => r.name === name)?.permission ?? 'admin', o.token),
          args: fields,
          ...(o.input === undefined ? {} : { input: o.input }),
          ...(o.idempotencyKey === undefined ? {} : { idempotencyKey: o.idempotencyKey }),
        });
        process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
      },
    );
}
