/** wrk (Debian package) as the non-streaming load generator, with a Lua script that POSTs a JSON body. */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function findWrk(): { bin: string } | { missing: string } {
  const r = spawnSync('wrk', ['--version'], { encoding: 'utf8' });
  // wrk --version exits 1 but prints its banner.
  if (r.error === undefined && `${r.stdout}${r.stderr}`.includes('wrk')) return { bin: 'wrk' };
  return { missing: 'wrk is not installed (apt-get install -y wrk)' };
}

export interface WrkResult {
  requests: number;
  durationS: number;
  rps: number;
  /** Non-2xx answers and socket errors, wrk's timeouts included. */
  errors: number;
  /** Of `errors`, the requests wrk gave up on after its 2 s timeout (slow answers, not refusals). */
  timeouts: number;
  p50Ms: number;
  p99Ms: number;
}

function toMs(value: string, unit: string): number {
  const v = Number(value);
  if (unit === 'us') return v / 1000;
  if (unit === 's') return v * 1000;
  if (unit === 'm') return v * 60_000;
  return v;
}

export function parseWrk(out: string): WrkResult {
  const req = /(\d+) requests in ([\d.]+)(m?s)/.exec(out);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const p50 = /\s50%\s+([\d.]+)(us|ms|s|m)/.exec(out);
  const p99 = /\s99%\s+([\d.]+)(us|ms|s|m)/.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  if (req === null || rps === null || p50 === null || p99 === null)
    throw new Error(`cannot parse wrk output:\n${out}`);
  const errors =
    Number(non2xx?.[1] ?? 0) + (sock === null ? 0 : sock.slice(1).reduce((a, b) => a + Number(b), 0));
  return {
    requests: Number(req[1]),
    durationS: req[3] === 'ms' ? Number(req[2]) / 1000 : Number(req[2]),
    rps: Number(rps[1]),
    errors,
    timeouts: Number(sock?.[4] ?? 0),
    p50Ms: toMs(p50[1]!, p50[2]!),
    p99Ms: toMs(p99[1]!, p99[2]!),
  };
}

export function wrkScript(body: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'uis-bench-wrk-'));
  const file = join(dir, 'post.lua');
  writeFileSync(
    file,
    `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/json"\n`,
  );
  return file;
}

export function runWrk(
  url: string,
  connections: number,
  durationS: number,
  script: string,
): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'wrk',
      ['-t1', `-c${connections}`, `-d${durationS}s`, '--latency', '-s', script, url],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.on('error', reject);
    child.on('exit', () => {
      try {
        resolve(parseWrk(out));
      } catch (e) {
        reject(e);
      }
    });
  });
}
