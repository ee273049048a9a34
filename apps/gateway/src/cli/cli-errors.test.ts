import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@uis/sglang-engine/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** Bad input to the real `uis` binary: every case exits 2 with one error in the CLI's shape
 * (`uis <command>: unusable input` then `  <path>: <message> [<code>]`), no stack trace, and nothing left running. */

const root = join(import.meta.dirname, '..', '..', '..', '..');
const bin = join(root, 'apps', 'gateway', 'bin', 'uis-dev.mjs');
const tmp = mkdtempSync(join(tmpdir(), 'uis-cli-'));
let busy: Server;
let busyPort = 0;

beforeAll(async () => {
  busy = createServer();
  busy.listen(0, '127.0.0.1');
  await once(busy, 'listening');
  busyPort = (busy.address() as { port: number }).port;
});

afterAll(() => {
  busy.close();
  rmSync(tmp, { recursive: true, force: true });
});

const file = (name: string, text: string) => {
  const p = join(tmp, name);
  writeFileSync(p, text);
  return p;
};

const cluster = 'cluster: { nodes: [{ name: n, gpus: 2 }] }\n';
const rollout = [
  'roles:',
  '  rollout:',
  '    deployment: { mode: decoupled }',
  '    models:',
  '      - { name: policy, model_path: /m, weight_source: disk, engine_groups: [{ num_gpus: 2, gpus_per_engine: 1 }] }',
  '',
].join('\n');
const config = (name: string, extra = '') => file(name, `${cluster}${rollout}${extra}`);

/** Runs `uis` in its own process group; after it exits, the group must be empty (no engine left behind). */
async function uis(args: string[]) {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: root,
    detached: true,
    env: { ...process.env, UIS_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  // tsx's esbuild service is a child that exits just after the CLI (it sees its stdin close): give the group a
  // moment to empty. An engine left behind would still be there after it.
  const alive = () => {
    try {
      process.kill(-(child.pid as number), 0);
      return true;
    } catch {
      return false;
    }
  };
  // A group left alive fails only after the deadline.
  await waitFor(() => !alive(), 20_000, 'the process group gone').catch(() => undefined);
  const groupAlive = alive();
  if (groupAlive) process.kill(-(child.pid as number), 'SIGKILL');
  return { code, out, err, groupAlive };
}

type Case = [
  name: string,
  args: () => string[],
  command: string,
  path: string,
  code: string,
  message?: RegExp,
];

const cases: Case[] = [
  ['an unknown command', () => ['srve'], 'uis', 'uis srve', 'unknown_command'],
  ['an unknown global flag', () => ['--verbose'], 'uis', '--verbose', 'unknown_option'],
  [
    'an unknown serve flag',
    () => ['serve', '--config', 'x.yaml', '--prot', '1'],
    'uis serve',
    '--prot',
    'unknown_option',
  ],
  ['serve without --config', () => ['serve'], 'uis serve', '--config', 'missing_mandatory_option_value'],
  [
    '--config without a value',
    () => ['serve', '--config'],
    'uis serve',
    '--config',
    'option_missing_argument',
  ],
  [
    'a stray argument',
    () => ['serve', '--config', config('a.yaml'), 'now'],
    'uis serve',
    'uis serve',
    'excess_arguments',
  ],
  [
    '--port abc',
    () => ['serve', '--config', config('p1.yaml'), '--port', 'abc'],
    'uis serve',
    '--port',
    'invalid_argument',
    /"abc" is invalid: must be a port/,
  ],
  ['--port -1', () => ['demo', '--port', '-1'], 'uis demo', '--port', 'invalid_argument'],
  ['--port 70000', () => ['demo', '--port', '70000'], 'uis demo', '--port', 'invalid_argument'],
  // Number('') is 0: an empty port used to start on a random port.
  [
    'an empty --port',
    () => ['serve', '--config', config('p2.yaml'), '--port='],
    'uis serve',
    '--port',
    'invalid_argument',
  ],
  [
    'a hex --port',
    () => ['serve', '--config', config('p3.yaml'), '--port', '0x50'],
    'uis serve',
    '--port',
    'invalid_argument',
  ],
  [
    'an exponent --port',
    () => ['serve', '--config', config('p4.yaml'), '--port', '1e3'],
    'uis serve',
    '--port',
    'invalid_argument',
  ],
  // An empty host used to listen on every interface.
  [
    'an empty --host',
    () => ['serve', '--config', config('h1.yaml'), '--port', '0', '--host='],
    'uis serve',
    '--host',
    'invalid_argument',
  ],
  [
    'a host that is not this machine',
    () => ['serve', '--config', config('h2.yaml'), '--port', '0', '--host', '192.0.2.1'],
    'uis serve',
    '--host',
    'host_unavailable',
  ],
  [
    'an unknown launcher',
    () => ['serve', '--config', config('l.yaml'), '--launcher', 'docker'],
    'uis serve',
    '--launcher',
    'invalid_argument',
    /must be sim, local, external or ray/,
  ],
  [
    'a port in use, given by flag',
    () => ['serve', '--config', config('u1.yaml'), '--port', String(busyPort)],
    'uis serve',
    '--port',
    'port_in_use',
    /is in use/,
  ],
  [
    'a port in use, from the config',
    () => ['serve', '--config', config('u2.yaml', `gateway: { port: ${busyPort} }\n`)],
    'uis serve',
    'gateway.port',
    'port_in_use',
  ],
  [
    'a port in use for the demo',
    () => ['demo', '--port', String(busyPort)],
    'uis demo',
    '--port',
    'port_in_use',
  ],
  [
    '--config naming a directory',
    () => ['serve', '--config', tmp],
    'uis serve',
    '--config',
    'not_a_file',
    /is a directory/,
  ],
  [
    'a missing demo --config',
    () => ['demo', '--config', join(tmp, 'none.yaml')],
    'uis demo',
    '--config',
    'missing_file',
  ],
  [
    'a missing --sglang-config',
    () => [
      'plan',
      '--relax-args',
      '--',
      '--resource',
      '{"actor": [1, 8]}',
      '--sglang-config',
      join(tmp, 'none.yaml'),
    ],
    'uis plan',
    '--sglang-config',
    'missing_file',
  ],
  [
    'an empty config',
    () => ['serve', '--config', file('empty.yaml', '')],
    'uis serve',
    '(root)',
    'invalid_config',
    /the file is empty/,
  ],
  [
    'a config that is a list',
    () => ['serve', '--config', file('list.yaml', '- a\n- b\n')],
    'uis serve',
    '(root)',
    'invalid_config',
    /found a list/,
  ],
  [
    'a config that is a string',
    () => ['plan', '--config', file('str.yaml', 'hello\n')],
    'uis plan',
    '(root)',
    'invalid_config',
    /found a string/,
  ],
  [
    'a JSON syntax error',
    () => ['serve', '--config', file('bad.json', '{"cluster": ')],
    'uis serve',
    'line 1, column 13',
    'config_parse_error',
  ],
  [
    'a typo of a top-level key',
    () => ['serve', '--config', config('t.yaml', 'gatway: { port: 1 }\n')],
    'uis serve',
    'gatway',
    'unknown_field',
  ],
  [
    'a TP size of the wrong type',
    () => [
      'serve',
      '--config',
      file(
        'tp.yaml',
        `${cluster}${rollout.replace('gpus_per_engine: 1 }', 'gpus_per_engine: 1, tp: two }')}`,
      ),
    ],
    'uis serve',
    'roles.rollout.models[0].engine_groups[0].tp',
    'invalid_type',
  ],
  [
    'an unknown deployment mode',
    () => ['serve', '--config', file('mode.yaml', `${cluster}${rollout.replace('decoupled', 'colocated')}`)],
    'uis serve',
    'roles.rollout.deployment.mode',
    'invalid_value',
  ],
  [
    'an unknown phase resident',
    () => [
      'plan',
      '--config',
      config(
        'ph.yaml',
        'schedule: { activation_groups: [{ name: g, phases: [{ name: p, residents: [critic] }] }] }\n',
      ),
    ],
    'uis plan',
    'schedule.activation_groups[0].phases[0].residents[0]',
    'invalid_value',
  ],
  [
    'an unknown launcher in the config',
    () => ['serve', '--config', config('gl.yaml', 'gateway: { launcher: docker }\n')],
    'uis serve',
    'gateway.launcher',
    'invalid_value',
  ],
  [
    'a bad gateway.ray block',
    () => [
      'serve',
      '--config',
      config('ray.yaml', 'gateway: { launcher: ray, ray: { address: "ray-head" } }\n'),
    ],
    'uis serve',
    'gateway.ray.address',
    'invalid_custom',
    /host:port of the Ray GCS/,
  ],
  // Used to fail while starting engines with "Invalid URL" and no path.
  [
    'an external engine URL that is not a URL',
    () => [
      'serve',
      '--config',
      config('ext.yaml', 'gateway: { launcher: external, external_urls: { policy/0: "not a url" } }\n'),
      '--port',
      '0',
    ],
    'uis serve',
    'gateway.external_urls.policy/0',
    'invalid_custom',
    /not a URL/,
  ],
  // Used to hang the planner for minutes, building a hundred million bundles.
  [
    'a node with a hundred million GPUs',
    () => [
      'plan',
      '--config',
      file(
        'huge.yaml',
        `${cluster.replace('gpus: 2', 'gpus: 100000000')}${rollout.replace('num_gpus: 2', 'num_gpus: 100000000')}`,
      ),
    ],
    'uis plan',
    'cluster.nodes[0].gpus',
    'invalid_too_big',
  ],
  [
    'a --db in a missing directory',
    () => ['serve', '--config', config('db1.yaml'), '--port', '0', '--db', join(tmp, 'no', 'uis.db')],
    'uis serve',
    '--db',
    'invalid_db_path',
    /does not exist/,
  ],
  [
    'a --db that is a directory',
    () => ['serve', '--config', config('db2.yaml'), '--port', '0', '--db', tmp],
    'uis serve',
    '--db',
    'invalid_db_path',
    /is a directory/,
  ],
  [
    'a gateway.db_path in a missing directory',
    () => [
      'serve',
      '--config',
      config('db3.yaml', `gateway: { db_path: ${join(tmp, 'no', 'uis.db')} }\n`),
      '--port',
      '0',
    ],
    'uis serve',
    'gateway.db_path',
    'invalid_db_path',
  ],
  [
    'adoption without a database file',
    () => ['serve', '--config', config('adopt1.yaml'), '--port', '0', '--adopt-engines'],
    'uis serve',
    'gateway.adopt_engines',
    'adoption_unsupported',
    /db_path/,
  ],
  [
    'adoption with engines that cannot outlive uis',
    () => [
      'serve',
      '--config',
      config('adopt2.yaml'),
      '--port',
      '0',
      '--launcher',
      'external',
      '--adopt-engines',
      '--db',
      join(tmp, 'adopt2.db'),
    ],
    'uis serve',
    'gateway.adopt_engines',
    'adoption_unsupported',
    /launcher external/,
  ],
  [
    'uis demo --adopt-engines without --processes',
    () => ['demo', '--port', '0', '--adopt-engines', '--db', join(tmp, 'adopt3.db')],
    'uis demo',
    '--adopt-engines',
    'invalid_argument',
  ],
];

describe('uis on bad input', { timeout: 90_000 }, () => {
  it.each(cases)(
    '%s: exit 2, one error at its path with its code',
    async (_name, args, command, path, code, message) => {
      const r = await uis(args());
      expect(r.code).toBe(2);
      const lines = r.err.split('\n');
      expect(lines[0]).toBe(`${command}: unusable input`);
      expect(lines[1]).toMatch(/^ {2}.+: .+ \[[a-z_]+\]$/);
      expect(lines[1]?.startsWith(`  ${path}: `)).toBe(true);
      expect(lines[1]?.endsWith(` [${code}]`)).toBe(true);
      if (message) expect(lines[1]).toMatch(message);
      expect(r.err).not.toMatch(/\n\s+at /);
      // Nothing was started: no engine output on stdout, no process left in the command's group.
      expect(r.out).not.toMatch(/console\s+http/);
      expect(r.groupAlive).toBe(false);
    },
  );

  it('still prints help and exits 0 when asked', async () => {
    const r = await uis(['serve', '--help']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('--config <file>');
    expect(r.err).toBe('');
  });
});
