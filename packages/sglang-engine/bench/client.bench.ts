/** What the typed client costs over raw undici, against one sglang-sim process with zero modelled latency:
 * requests/s of a 1-token /generate and streamed chunks/s, side by side in one run. */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { Pool } from 'undici';
import { SGLangClient } from '../src/client.ts';
import { freePort } from '../src/ports.ts';
import { SIM_BIN } from '../src/testing.ts';

const DURATION_MS = Number(process.env.BENCH_MS ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const STREAM_TOKENS = 64;

async function run(label: string, call: () => Promise<number>) {
  const until = Date.now() + DURATION_MS;
  let calls = 0;
  let units = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        const n = await call();
        units += n;
        calls++;
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  return { case: label, 'calls/s': Math.round(calls / s), 'chunks/s': Math.round(units / s), calls };
}

async function main() {
  const port = await freePort();
  const sim = spawn(process.execPath, [SIM_BIN, '--port', String(port), '--host', '127.0.0.1'], {
    stdio: 'ignore',
    detached: true,
  });
  const url = `http://127.0.0.1:${port}`;
  const client = new SGLangClient(url, { connections: CONCURRENCY });
  const raw = new Pool(url, { connections: CONCURRENCY });
  try {
    const until = Date.now() + 30_000;
    for (;;) {
      try {
        if (await client.healthGenerate({ timeoutMs: 2000 })) break;
      } catch {
        // still starting
      }
      if (Date.now() > until) throw new Error('sglang-sim did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
    const one = { text: 'bench', sampling_params: { max_new_tokens: 1 } };
    const streamReq = { text: 'bench', sampling_params: { max_new_tokens: STREAM_TOKENS, ignore_eos: true } };
    const rows = [];
    rows.push(
      await run('raw undici /generate (JSON.parse)', async () => {
        const r = await raw.request({
          path: '/generate',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(one),
        });
        JSON.parse(await r.body.text());
        return 1;
      }),
    );
    rows.push(
      await run('SGLangClient.generate (zod)', async () => {
        await client.generate(one);
        return 1;
      }),
    );
    rows.push(
      await run(`raw undici stream, ${STREAM_TOKENS} tokens (chunks)`, async () => {
        const r = await raw.request({
          path: '/generate',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ...streamReq, stream: true }),
        });
        let n = 0;
        // Events minus the final [DONE], as the typed client counts them.
        for await (const c of r.body) n += String(c).split('\n\n').length - 1;
        return n - 1;
      }),
    );
    rows.push(
      await run(`SGLangClient.generateStream, ${STREAM_TOKENS} tokens (chunks)`, async () => {
        let n = 0;
        for await (const c of client.generateStream(streamReq)) if (c.meta_info) n++;
        return n;
      }),
    );
    const load = loadavg()
      .map((x) => x.toFixed(1))
      .join(' ');
    console.log(
      `sglang-engine client bench: ${DURATION_MS} ms per case, concurrency ${CONCURRENCY}, loadavg ${load}`,
    );
    console.table(rows);
  } finally {
    await client.close();
    await raw.destroy();
    if (sim.pid) process.kill(-sim.pid, 'SIGKILL');
  }
}

await main();
