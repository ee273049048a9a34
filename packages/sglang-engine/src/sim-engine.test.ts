import { UisError } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { SGLangEngine } from './engine.ts';
import { EngineError } from './engine-error.ts';
import type { ProcessExit } from './launcher.ts';
import { ManualClock } from './manual-clock.ts';
import type { GenerateReqInput } from './protocol.ts';
import { alive, failure, type SimEngineOptions, simEngine } from './testing.ts';
import { waitFor } from './wait-for.ts';

/** SGLangEngine, the local launcher and the client's fault handling against real sglang-sim processes. */
const engines: SGLangEngine[] = [];
const allPids: number[] = [];

afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.shutdown(3000)));
  // Whatever a test did (crash, failed start, shutdown), no simulator process may be left behind.
  expect(allPids.splice(0).filter(alive)).toEqual([]);
}, 30_000);

async function started(opts: SimEngineOptions = {}): Promise<SGLangEngine> {
  const e = await simEngine(opts);
  engines.push(e);
  await e.start({ deadlineMs: 60_000 });
  allPids.push(...e.pids());
  return e;
}

const LONG = { text: 'long', sampling_params: { max_new_tokens: 100_000, ignore_eos: true } };

async function consume(e: SGLangEngine, req: GenerateReqInput = LONG): Promise<string> {
  let finish = '';
  for await (const c of e.client.generateStream(req)) finish = c.meta_info.finish_reason?.type ?? finish;
  return finish;
}

async function engineLoad(e: SGLangEngine): Promise<number> {
  return (await e.client.load()).reduce((n, r) => n + r.num_reqs + r.num_waiting_reqs, 0);
}

describe('SGLangEngine lifecycle on sglang-sim', () => {
  it('starts, sleeps, wakes, updates weights and shuts down leaving no process', async () => {
    const e = await started({ offload: true });
    expect(e.pids()).toHaveLength(1);
    await e.sleep();
    const down = await failure(e.client.generate({ text: 'x' }), EngineError);
    expect(down.code).toBe('engine_http_error');
    await e.wake(['weights']);
    expect(
      await e.updateWeights({ source: 'disk', modelPath: 'sim/tiny-model', weightVersion: 'step-1' }),
    ).toEqual({
      weightVersion: 'step-1',
    });
    await e.wake(['kv_cache', 'cuda_graph']);
    expect(
      (await e.client.generate({ text: 'x', sampling_params: { max_new_tokens: 2 } })).meta_info.id,
    ).toBeTruthy();
    expect(await e.updateWeights({ source: 'version', weightVersion: 'step-2' })).toEqual({
      weightVersion: 'step-2',
    });
    expect(await e.weightVersion()).toBe('step-2');
    const pids = e.pids();
    await e.shutdown();
    expect(pids.filter(alive)).toEqual([]);
  }, 90_000);

  it('fails start with the engine log tail when the process exits, and stops it', async () => {
    const e = await simEngine({ serverArgs: { context_length: -5 } });
    engines.push(e);
    const err = await failure(e.start({ deadlineMs: 60_000 }), UisError);
    allPids.push(...e.pids());
    expect(err.code).toBe('engine_start_failed');
    expect(err.message).toMatch(/exited/);
    expect(err.message).toMatch(/context/i);
  }, 90_000);

  it('fails start at the deadline when the engine never gets healthy, not before, and stops it', async () => {
    // The start deadline runs on a clock the test moves: exactly 2000 ms of polling, however slow the machine.
    const clock = new ManualClock();
    const e = await simEngine({ simFlags: ['--sim-startup-ms', '600000'], clock });
    engines.push(e);
    let settled = false;
    const outcome = failure(e.start({ deadlineMs: 2000 }), UisError).finally(() => {
      settled = true;
    });
    for (let polled = 0; polled < 2000; polled += 100) {
      await clock.untilPending();
      expect(settled).toBe(false);
      await clock.advance(100);
    }
    const err = await outcome;
    allPids.push(...e.pids());
    expect(err.code).toBe('engine_start_failed');
    expect(err.message).toContain('not healthy within 2000 ms');
    expect(e.pids().filter(alive)).toEqual([]);
  }, 90_000);

  it('drain wait: returns once in-flight work ends', async () => {
    const e = await started({ simFlags: ['--sim-decode-us-per-token', '1000'] });
    const short = e.client.generate({
      text: 'short',
      sampling_params: { max_new_tokens: 200, ignore_eos: true },
    });
    let gatewayInFlight = 1;
    void short.then(() => {
      gatewayInFlight = 0;
    });
    // The drain starts while the caller still counts the request in flight; no wait for the engine to show it,
    // which a loaded machine could poll only after the 200 ms request has ended.
    const report = await e.drain({ policy: 'wait', deadlineMs: 60_000, inFlight: () => gatewayInFlight });
    expect(report).toMatchObject({
      policy: 'wait',
      timedOut: false,
      aborted: false,
      flushed: true,
      inFlightAtEnd: 0,
    });
    expect(report.inFlightAtStart).toBeGreaterThanOrEqual(1);
    expect((await short).meta_info.finish_reason?.type).toBe('length');
  }, 90_000);

  it('drain wait: aborts what is left at the deadline, not before', async () => {
    const launched = await started({ simFlags: ['--sim-decode-us-per-token', '1000'] });
    // The same engine attached by URL with a clock the test moves: the drain deadline is exactly 500 ms of it.
    const clock = new ManualClock();
    const e = new SGLangEngine({ engineId: 'sim-model/0', baseUrl: launched.baseUrl, clock, pollMs: 100 });
    engines.push(e);
    const long = consume(e);
    await waitFor(async () => (await engineLoad(e)) > 0, 30_000);
    let settled = false;
    const draining = e.drain({ policy: 'wait', deadlineMs: 500 }).finally(() => {
      settled = true;
    });
    for (let waited = 0; waited < 500; waited += 100) {
      await clock.untilPending();
      expect(settled).toBe(false);
      await clock.advance(100);
    }
    const timed = await draining;
    expect(timed).toMatchObject({ timedOut: true, aborted: true, flushed: true, waitedMs: 500 });
    expect(await long).toBe('abort');
  }, 90_000);

  it('drain abort stops running requests at once; wake continues generation', async () => {
    const e = await started({ offload: true, simFlags: ['--sim-decode-us-per-token', '1000'] });
    const long = consume(e);
    await waitFor(async () => (await engineLoad(e)) > 0, 30_000);
    const report = await e.drain({ policy: 'abort', deadlineMs: 30_000 });
    expect(report).toMatchObject({ paused: 'abort', aborted: true, flushed: true, inFlightAtEnd: 0 });
    expect(await long).toBe('abort');
    await e.sleep();
    await e.wake();
    const after = await e.client.generate({ text: 'again', sampling_params: { max_new_tokens: 3 } });
    expect(after.meta_info.completion_tokens).toBe(3);
  }, 90_000);

  it('drain in_place pauses without flushing; continue resumes the frozen request', async () => {
    const e = await started({ simFlags: ['--sim-decode-us-per-token', '1000'] });
    // 5 s of decoding: the request must still run when the pause lands, after a poll, a load read and the pause
    // call (300 ms could pass in those on a loaded machine), and still finish once continued.
    const req = { text: 'frozen', sampling_params: { max_new_tokens: 5_000, ignore_eos: true } };
    const frozen = consume(e, req);
    await waitFor(async () => (await engineLoad(e)) > 0, 30_000);
    const report = await e.drain({ policy: 'in_place', deadlineMs: 30_000 });
    expect(report).toMatchObject({ paused: 'in_place', aborted: false, flushed: false });
    const paused = await engineLoad(e);
    expect(paused).toBe(1);
    await e.updateWeights({ source: 'version', weightVersion: 'in-place-1' });
    await e.resumeGeneration();
    expect(await frozen).toBe('length');
  }, 90_000);
});

describe('injected faults end in typed errors, not hangs', () => {
  it('crash mid-stream: stream error, exit reported, nothing left behind', async () => {
    const e = await started({ simFlags: ['--sim-crash-after', '1'] });
    const exits: ProcessExit[] = [];
    e.onExit((x) => exits.push(x));
    await e.client.generate({ text: 'ok', sampling_params: { max_new_tokens: 2 } });
    const err = await failure(
      consume(e, { text: 'boom', sampling_params: { max_new_tokens: 50 } }),
      EngineError,
    );
    expect(['engine_stream_error', 'engine_unreachable']).toContain(err.code);
    await waitFor(() => exits.length === 1, 30_000);
    expect(exits[0]!.nodeRank).toBe(0);
    expect(exits[0]!.code !== 0 || exits[0]!.signal !== null).toBe(true);
    const next = await failure(e.client.health(), EngineError);
    expect(next.code).toBe('engine_unreachable');
  }, 90_000);

  it('hang: whole-call and idle timeouts give engine_timeout', async () => {
    const e = await started({ simFlags: ['--sim-hang-after', '1'] });
    await e.client.generate({ text: 'ok', sampling_params: { max_new_tokens: 2 } });
    const streamed: unknown[] = [];
    const stream = e.client.generateStream(
      { text: 'y', sampling_params: { max_new_tokens: 5 } },
      { idleTimeoutMs: 1000 },
    );
    const s = await failure(
      (async () => {
        for await (const c of stream) streamed.push(c);
      })(),
      EngineError,
    );
    expect(s.code, s.message).toBe('engine_timeout');
    // A hung engine also stops answering health checks: the whole-call deadline turns that into a timeout.
    const t = await failure(e.client.healthGenerate({ timeoutMs: 1000 }), EngineError);
    expect(t.code).toBe('engine_timeout');
  }, 90_000);

  it('5xx: engine_http_error with the engine status', async () => {
    const e = await started({ simFlags: ['--sim-error-rate', '1'] });
    const err = await failure(
      e.client.generate({ text: 'x', sampling_params: { max_new_tokens: 2 } }),
      EngineError,
    );
    expect(err.code).toBe('engine_http_error');
    expect(err.engineStatus).toBeGreaterThanOrEqual(500);
    expect(err.status).toBe(502);
  }, 90_000);

  it('early release: resuming right after a release that answered early fails with a typed error', async () => {
    // The offload outlasts the test, so the resume meets memory still being released however slow the machine.
    const e = await started({
      offload: true,
      simFlags: ['--sim-early-release', '--sim-offload-ms', '60000'],
    });
    await e.sleep();
    const err = await failure(e.wake(), EngineError);
    expect(err.code).toBe('engine_http_error');
    expect(err.message).toMatch(/released|memory/i);
  }, 90_000);
});

describe('multi-node engine on one machine', () => {
  it('runs two TP processes behind one head URL and stops both', async () => {
    const e = await started({ nnodes: 2, gpusPerNode: 2 });
    expect(e.pids()).toHaveLength(2);
    expect(e.pids().every(alive)).toBe(true);
    const info = await e.client.serverInfo();
    expect(info.tp_size).toBe(4);
    expect(info.nnodes).toBe(2);
    const out = await e.client.generate({ text: 'two nodes', sampling_params: { max_new_tokens: 3 } });
    expect(out.meta_info.completion_tokens).toBe(3);
    const pids = e.pids();
    await e.shutdown();
    expect(pids.filter(alive)).toEqual([]);
  }, 90_000);

  it('reports the loss of a worker node and leaves nothing behind', async () => {
    const e = await started({ nnodes: 2, gpusPerNode: 1 });
    const exits: ProcessExit[] = [];
    e.onExit((x) => exits.push(x));
    process.kill(-e.pids()[1]!, 'SIGKILL');
    await waitFor(() => exits.some((x) => x.nodeRank === 1), 30_000);
    expect(exits.find((x) => x.nodeRank === 1)!.signal).toBe('SIGKILL');
  }, 90_000);
});
