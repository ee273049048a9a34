// The README's quick start as a new user runs it: a fresh clone of this commit, the set-up commands of the README's
// `sh` block (pnpm install, which builds the `uis` CLI; pip install of the Python client into a fresh venv), `uis
// demo` in the background, then the Python example script and the README's Python snippet against it. The commands
// are read from the README, so a README that stops working fails here. Two departures, both said where they happen:
// `npm i -g pnpm@V` is not run (it would replace this machine's pnpm; the test checks that pnpm is that version), and
// port 8080 becomes a free port (tests never take a fixed port).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const work = mkdtempSync(join(tmpdir(), 'uis-quickstart-'));
const clone = join(work, 'uis');
const venv = join(work, 'venv');
let demo: ChildProcess | undefined;

/** The quick start's `sh` and `python` blocks, from the README of the clone. */
function quickStart(readme: string): { shell: string[]; python: string } {
  const section = readme.split(/^## /m).find((s) => s.startsWith('Quick start'));
  const blocks = [...(section ?? '').matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)];
  const block = (lang: string) => blocks.find((b) => b[1] === lang)?.[2] ?? '';
  const shell = block('sh')
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
  return { shell, python: block('python') };
}

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as { port: number };
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** The environment of a user's shell: the venv first on PATH, nothing inherited from the test runner. */
function userEnv(): NodeJS.ProcessEnv {
  const {
    NODE_OPTIONS: _o,
    VITEST: _v,
    VITEST_POOL_ID: _p,
    VITEST_WORKER_ID: _w,
    PYTHONPATH: _py,
    ...rest
  } = process.env;
  return { ...rest, PATH: [join(venv, 'bin'), rest.PATH].join(delimiter), VIRTUAL_ENV: venv };
}

/** Runs one README line in bash in the clone; a failure throws with its output, naming the line. */
function sh(line: string, timeout = 600_000): string {
  const r = spawnSync('bash', ['-c', line], { cwd: clone, env: userEnv(), encoding: 'utf8', timeout });
  if (r.status !== 0)
    throw new Error(`\`${line}\` exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`.slice(-6000));
  transcript(line, `${r.stdout}${r.stderr}`);
  return `${r.stdout}${r.stderr}`;
}

/** The command and the last lines it printed, in the test log (the transcript of a fresh clone's quick start). */
function transcript(line: string, output: string): void {
  const tail = output.trim().split('\n').slice(-3).join('\n  ');
  console.log(`$ ${line}\n  ${tail}`);
}

/** Starts a README line that ends in `&` in its own process group; resolves once `uis` prints its console URL. */
function background(line: string): Promise<{ output: () => string }> {
  const child = spawn('bash', ['-c', line], { cwd: clone, env: userEnv(), detached: true });
  demo = child;
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no console URL in 300 s:\n${out}`)), 300_000);
    let listening = false;
    const seen = (d: Buffer) => {
      out += d.toString();
      if (!listening && /console\s+http:\/\/127\.0\.0\.1:\d+\//.test(out)) {
        listening = true;
        clearTimeout(timer);
        transcript(`${line} &`, out);
        resolve({ output: () => out });
      }
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`\`${line}\` exited ${code} before listening:\n${out}`));
    });
  });
}

/** Stops the background `uis` (SIGTERM to its group, as Ctrl-C would) and waits for it to exit. */
async function stopDemo(): Promise<void> {
  const child = demo;
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  process.kill(-child.pid, 'SIGTERM');
  const late = setTimeout(() => child.pid && process.kill(-child.pid, 'SIGKILL'), 60_000);
  await exited;
  clearTimeout(late);
}

afterAll(async () => {
  await stopDemo();
  rmSync(work, { recursive: true, force: true });
});

describe('the README quick start on a fresh clone', () => {
  let shell: string[] = [];
  let python = '';
  let port = 0;
  const local = (text: string) => text.replaceAll('8080', String(port));

  beforeAll(async () => {
    const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim();
    const c = spawnSync('git', ['clone', '--quiet', root, clone], { encoding: 'utf8' });
    if (c.status !== 0) throw new Error(`git clone failed: ${c.stderr}`);
    spawnSync('git', ['checkout', '--quiet', head], { cwd: clone });
    ({ shell, python } = quickStart(readFileSync(join(clone, 'README.md'), 'utf8')));
    port = await freePort();
    const v = spawnSync(process.env.PYTHON ?? 'python3', ['-m', 'venv', venv], { encoding: 'utf8' });
    if (v.status !== 0) throw new Error(`python3 -m venv failed: ${v.stderr}`);
  });

  it('has the four set-up commands the README promises, and a Python snippet', () => {
    expect(shell).toHaveLength(4);
    expect(shell[0]).toMatch(/^npm i -g pnpm@[\d.]+ && pnpm install$/);
    expect(shell[1]).toBe('pip install ./clients/python');
    expect(shell[2]).toMatch(/ demo .*&$/);
    expect(shell[3]).toMatch(/^python examples\/python\/rl_step\.py /);
    expect(python).toContain('from uis_client import');
  });

  it('runs them verbatim: the install builds `uis`, the demo starts, the RL step and the snippet complete', {
    timeout: 1_500_000,
  }, async () => {
    const [install, pip, start, step] = shell.map(local) as [string, string, string, string];
    // `npm i -g pnpm@V && ...`: not run (it replaces this machine's pnpm); the pnpm here must be that version.
    const [, pinned, rest] = /^npm i -g pnpm@([\d.]+) && (.*)$/.exec(install) ?? [];
    expect(sh('pnpm --version').trim()).toBe(pinned);
    const installed = sh(rest ?? '');
    expect(installed).toContain('uis: building the CLI');
    expect(sh('node apps/gateway/bin/uis.mjs --version').trim()).toBe(
      JSON.parse(readFileSync(join(clone, 'apps', 'gateway', 'package.json'), 'utf8')).version,
    );

    sh(pip);
    expect(sh('python -c "import uis_client, sys; print(uis_client.__file__)"')).toContain(venv);

    const running = await background(start.replace(/&$/, '').trim());
    // The compiled CLI runs (the build on install worked), not the source fallback.
    expect(running.output()).not.toContain('running from the TypeScript source');

    expect(sh(step, 300_000)).toMatch(/weight_version=step-1 scores=3 logprobs=3/);

    const snippet = join(work, 'quickstart.py');
    writeFileSync(snippet, local(python));
    const printed = sh(`python ${snippet}`, 300_000).trim().split('\n').pop() ?? '';
    // One GenRM score for the one sample: a Python list with one output in it.
    expect(printed).toMatch(/^\[.+\]$/);
    expect(printed).not.toBe('[None]');
    await stopDemo();
    // Ctrl-C (SIGTERM here) stops everything and exits 0.
    expect(demo?.exitCode).toBe(0);
  });
});
