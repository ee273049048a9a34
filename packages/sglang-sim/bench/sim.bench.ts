/**
 * The simulator's own overhead ceiling with zero modelled latency: requests/s and streamed tokens/s, measured with
 * wrk (or a fetch-based load loop in a child process when wrk is missing) against a simulator running as a separate
 * process. The baseline row is GET /health on the same server: the cost of node:http alone.
 *
 *   pnpm bench            (env: BENCH_SECONDS=5 BENCH_CONNECTIONS=32)
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const BIN = fileURLToPath(new URL('../bin/sglang-sim.mjs', import.meta.url));

interface Scenario {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  /** Output tokens per request (exact: ignore_eos). */
  tokens: number;
}

const gen = (n: number, stream: boolean) => ({
  text: 'The quick model answers',
  sampling_params: { max_new_tokens: n, ignore_eos: true },
  stream,
});
const SCENARIOS: Scenario[] = [
  { name: 'GET /health (node:http baseline)', method: 'GET', path: '/health', tokens: 0 },
  { name: '/generate 1 token', method: 'POST', path: '/generate', body: gen(1, false), tokens: 1 },
  { name: '/generate 16 tokens', method: 'POST', path: '/generate', body: gen(16, false), tokens: 16 },
  { name: '/generate 128 tokens', method: 'POST', path: '/generate', body: gen(128, false), tokens: 128 },
  { name: '/generate stream 64 tokens', method: 'POST', path: '/generate', body: gen(64, true), tokens: 64 },
  {
    name: '/v1/chat/completions 16 tokens',
    method: 'POST',
    path: '/v1/chat/completions',
    body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16, ignore_eos: true },
    tokens: 16,
  },
  {
    name: '/v1/chat/completions stream 64',
    method: 'POST',
    path: '/v1/chat/completions',
    body: {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 64,
      ignore_eos: true,
      stream: true,
    },
    tokens: 64,
  },
];

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

function hasWrk(): boolean {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
    return true;
  } catch (e) {
    // wrk --version exits 1 but prints its banner; only a missing binary is ENOENT.
    return (e as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}

function runWrk(url: string, sc: Scenario, dir: string, seconds = SECONDS): { rps: number; errors: number } {
  const script = join(dir, `${sc.name.replace(/\W+/g, '_')}.lua`);
  const lua = [`wrk.method = "${sc.method}"`];
  if (sc.body !== undefined) {
    lua.push(`wrk.body = ${JSON.stringify(JSON.stringify(sc.body))}`);
    lua.push('wrk.headers["Content-Type"] = "application/json"');
  }
  writeFileSync(script, `${lua.join('\n')}\n`);
  const out = execFileSync(
    'wrk',
    ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '-s', script, `${url}${sc.path}`],
    {
      encoding: 'utf8',
    },
  );
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? Number.NaN);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = non2xx + (sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0);
  return { rps, errors };
}

/** Fallback load generator: CONNECTIONS concurrent fetch loops in a child process. */
function runFetch(url: string, sc: Scenario, seconds = SECONDS): { rps: number; errors: number } {
  const code = `
    const [url, method, body, seconds, conns] = process.argv.slice(1);
    let n = 0, errors = 0; const end = Date.now() + Number(seconds) * 1000;
    const loop = async () => { while (Date.now() < end) { try {
      const r = await fetch(url, { method, body: body || undefined, headers: body ? { 'content-type': 'application/json' } : {} });
      await r.arrayBuffer(); if (r.ok) n++; else errors++; } catch { errors++; } } };
    const t0 = Date.now();
    Promise.all(Array.from({ length: Number(conns) }, loop)).then(() => console.log(JSON.stringify({ rps: n / ((Date.now() - t0) / 1000), errors })));
  `;
  const out = execFileSync(
    process.execPath,
    [
      '-e',
      code,
      `${url}${sc.path}`,
      sc.method,
      sc.body === undefined ? '' : JSON.stringify(sc.body),
      String(seconds),
      String(CONNECTIONS),
    ],
    { encoding: 'utf8' },
  );
  return JSON.parse(out) as { rps: number; errors: number };
}

async function launch(extra: string[]): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const args = [BIN, '--port', String(port), '--model-path', 'bench/model', ...extra];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, child };
    if (Date.now() > deadline) throw new Error('simulator did not become healthy');
    await new Promise((r) => setTimeout(r, 100));
  }
}

function stop(child: ChildProcess): void {
  try {
    if (child.pid) process.kill(-child.pid, 'SIGTERM');
  } catch {
    // already stopped
  }
}

/** With a modelled decode step of 2 ms, CONNECTIONS concurrent requests should give CONNECTIONS / 2 ms tokens/s. */
async function timingModelCheck(wrk: boolean, dir: string): Promise<void> {
  const decodeUs = 2000;
  const { url, child } = await launch(['--sim-decode-us-per-token', String(decodeUs)]);
  try {
    const sc: Scenario = {
      name: 'timing',
      method: 'POST',
      path: '/generate',
      body: gen(64, false),
      tokens: 64,
    };
    const { rps } = wrk ? runWrk(url, sc, dir) : runFetch(url, sc);
    const measured = rps * 64;
    const modelled = CONNECTIONS / (decodeUs / 1e6);
    console.log(
      `\ntiming model: decode step ${decodeUs} us, ${CONNECTIONS} concurrent x 64 tokens: ${measured.toFixed(0)} tokens/s measured, ${modelled.toFixed(0)} modelled (${((measured * 100) / modelled).toFixed(0)}%)`,
    );
  } finally {
    stop(child);
  }
}

async function main(): Promise<void> {
  const { url, child } = await launch([]);
  try {
    const wrk = hasWrk();
    const dir = mkdtempSync(join(tmpdir(), 'sim-bench-'));
    console.log(
      `sglang-sim overhead ceiling: zero modelled latency, ${CONNECTIONS} connections, ${SECONDS}s per row, load: ${wrk ? 'wrk' : 'fetch loop'}\n`,
    );
    const rows: string[][] = [['scenario', 'req/s', 'tokens/s', 'errors', 'vs baseline']];
    // Warm the JIT on every path first, so the first rows do not pay for compilation.
    for (const sc of SCENARIOS) {
      if (wrk) runWrk(url, sc, dir, 1);
      else runFetch(url, sc, 1);
    }
    let baseline = Number.NaN;
    for (const sc of SCENARIOS) {
      const { rps, errors } = wrk ? runWrk(url, sc, dir) : runFetch(url, sc);
      if (Number.isNaN(baseline)) baseline = rps;
      rows.push([
        sc.name,
        rps.toFixed(0),
        sc.tokens === 0 ? '-' : (rps * sc.tokens).toFixed(0),
        String(errors),
        `${((rps / baseline) * 100).toFixed(0)}%`,
      ]);
    }
    const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
    for (const [i, r] of rows.entries()) {
      console.log(
        r.map((c, j) => (j === 0 ? c.padEnd(widths[j] ?? 0) : c.padStart(widths[j] ?? 0))).join('  '),
      );
      if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
    }
    stop(child);
    await timingModelCheck(wrk, dir);
  } finally {
    stop(child);
  }
}

void main();
