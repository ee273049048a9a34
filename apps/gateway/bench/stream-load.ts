/**
 * Load generator in its own process: `concurrency` closed-loop clients POST `body` to the URLs (spread evenly)
 * for `durationS` seconds and record time to first byte, total time, gaps between body chunks and SSE events.
 * Uses undici's dispatch handler directly so the client's own cost stays small. Prints one JSON LoadResult.
 *   tsx stream-load.ts --urls http://a/x,http://b/x --concurrency 512 --duration 10 --warmup 2 --body '{...}'
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { type Dispatcher, Pool } from 'undici';
import { type LoadResult, Samples, summarize } from './load-stats.ts';

const { values } = parseArgs({
  options: {
    urls: { type: 'string' },
    concurrency: { type: 'string', default: '64' },
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    body: { type: 'string', default: '{}' },
    ramp: { type: 'string' },
  },
});
const urls = (values.urls ?? '').split(',').filter((u) => u !== '');
if (urls.length === 0) throw new Error('--urls is required');
const concurrency = Number(values.concurrency);
const durationMs = Number(values.duration) * 1000;
const warmupMs = Number(values.warmup) * 1000;
const body = Buffer.from(values.body);
// Clients start spread over the ramp so a closed loop of long streams does not move in lockstep waves.
const rampMs = values.ramp === undefined ? warmupMs : Number(values.ramp) * 1000;

const targets = urls.map((u) => {
  const url = new URL(u);
  return {
    path: url.pathname + url.search,
    pool: new Pool(url.origin, {
      connections: Math.ceil(concurrency / urls.length),
      pipelining: 1,
      headersTimeout: 600_000,
      bodyTimeout: 600_000,
    }),
  };
});
let connects = 0;
for (const t of targets)
  t.pool.on('connect', () => {
    if (measuring) connects++;
  });
const loopDelay = monitorEventLoopDelay({ resolution: 5 });
loopDelay.enable();
const headers = ['content-type', 'application/json', 'content-length', String(body.length)];

const ttfb = new Samples();
const total = new Samples();
const gaps = new Samples();
let requests = 0;
let errors = 0;
let events = 0;
let chunks = 0;
let measuring = false;
let stopping = false;

function countEvents(chunk: Buffer): number {
  let n = 0;
  let i = chunk.indexOf('\n\n');
  while (i !== -1) {
    n++;
    i = chunk.indexOf('\n\n', i + 2);
  }
  return n;
}

/** One request; calls `done` when it ended either way. */
class Exchange implements Dispatcher.DispatchHandler {
  readonly start = performance.now();
  last = 0;
  status = 0;
  constructor(readonly done: () => void) {}
  /** Its presence tells undici this is a new-style (controller) handler. */
  onRequestStart(): void {}
  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
    this.last = performance.now();
    if (measuring) ttfb.add(this.last - this.start);
  }
  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    const now = performance.now();
    if (measuring) {
      gaps.add(now - this.last);
      chunks++;
      events += countEvents(chunk);
    }
    this.last = now;
  }
  onResponseEnd(): void {
    if (measuring) {
      if (this.status >= 200 && this.status < 300) {
        requests++;
        total.add(performance.now() - this.start);
      } else errors++;
    }
    this.done();
  }
  onResponseError(): void {
    if (measuring) errors++;
    this.done();
  }
}

function client(index: number): void {
  const target = targets[index % targets.length]!;
  const loop = () => {
    if (stopping) return;
    target.pool.dispatch({ method: 'POST', path: target.path, headers, body }, new Exchange(loop));
  };
  loop();
}

for (let i = 0; i < concurrency; i++) setTimeout(() => client(i), (i / concurrency) * rampMs);
setTimeout(() => {
  measuring = true;
  loopDelay.reset();
  // Phase lines let the bench sample the proxy's CPU exactly around the measured window.
  process.stdout.write('{"phase":"start"}\n');
  const t0 = performance.now();
  setTimeout(async () => {
    measuring = false;
    stopping = true;
    process.stdout.write('{"phase":"end"}\n');
    const durationS = (performance.now() - t0) / 1000;
    const result: LoadResult = {
      durationS,
      requests,
      errors,
      events,
      chunks,
      ttfbMs: summarize(ttfb),
      totalMs: summarize(total),
      gapMs: summarize(gaps),
      connects,
      loopDelayMs: {
        p50: loopDelay.percentile(50) / 1e6,
        p99: loopDelay.percentile(99) / 1e6,
        max: loopDelay.max / 1e6,
      },
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    await Promise.all(targets.map((t) => t.pool.destroy()));
    process.exit(0);
  }, durationMs);
}, warmupMs);
