import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { GenerateResponseSchema } from '@uis/sglang-engine';
import { ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { type SimServer, startSimServer } from '@uis/sglang-sim';
import { UisError } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectClient, type FetchLike } from './direct-client.ts';
import { RESEND_FIRST_MS, RESEND_LIMIT, RESEND_MAX_MS } from './direct-requests.ts';

const long = { input_ids: [3, 4, 5], sampling_params: { max_new_tokens: 10_000, ignore_eos: true } };

describe('DirectClient.abort: the replica the client chose aborts the request', { timeout: 30_000 }, () => {
  let sims: SimServer[];
  beforeAll(async () => {
    // 20 ms per token: a long generation still runs when the abort lands.
    sims = await Promise.all(
      [0, 1].map(() => startSimServer({ host: '127.0.0.1', port: 0, simDecodeUsPerToken: 20_000 })),
    );
    await Promise.all(sims.map((s) => s.ready));
  });
  afterAll(() => Promise.all(sims.map((s) => s.close())));

  it('a stream without a rid gets one (meta_info.id); abort ends it with the partial output, then [DONE]', async () => {
    const c = new DirectClient({ engineUrls: sims.map((s) => s.url) });
    await c.start();
    const chunks: string[] = [];
    const reading = (async () => {
      for await (const d of c.generateStream(long)) chunks.push(d);
    })();
    await waitFor(() => chunks.length >= 3);
    const rid = GenerateResponseSchema.parse(JSON.parse(chunks[0] as string)).meta_info.id;
    expect(rid).toMatch(/^direct-/);
    expect(await c.abort(rid)).toBe(true);
    await reading;
    const last = GenerateResponseSchema.parse(JSON.parse(chunks.at(-1) as string));
    expect(last.meta_info.finish_reason).toEqual({
      type: 'abort',
      message: 'Aborted',
      status_code: null,
      err_type: null,
    });
    expect(last.output_ids?.length).toBeGreaterThanOrEqual(3);
    expect(await c.abort(rid)).toBe(false);
  });

  it('a plain request keeps its rid; only the replica holding it is asked; an unknown rid is false', async () => {
    const c = new DirectClient({ engineUrls: sims.map((s) => s.url) });
    await c.start();
    const before = sims.map((s) => s.stats().aborted);
    const answer = c.generate({ ...long, rid: 'ts-plain' });
    const at = await waitFor(() => sims.find((s) => s.stats().running === 1));
    const other = sims.find((s) => s !== at) as SimServer;
    expect(await c.abort('ts-plain')).toBe(true);
    const out = GenerateResponseSchema.parse(await answer);
    expect(out.meta_info.finish_reason?.type).toBe('abort');
    expect(out.meta_info.id).toBe('ts-plain');
    expect(sims.map((s, i) => s.stats().aborted - (before[i] as number))).toEqual(
      sims.map((s) => (s === at ? 1 : 0)),
    );
    expect(other.stats().running).toBe(0);
    expect(await c.abort('never-sent')).toBe(false);
  });
});

describe('DirectClient.abort: an abort the engine drops (its rid not registered yet) is sent again', {
  timeout: 30_000,
}, () => {
  let sim: SimServer;
  beforeAll(async () => {
    sim = await startSimServer({ host: '127.0.0.1', port: 0, simDecodeUsPerToken: 20_000 });
    await sim.ready;
  });
  afterAll(() => sim.close());

  /** The client on `clock`, counting the abort_request calls it makes. */
  function counted(clock: ManualClock): { c: DirectClient; aborts: () => number } {
    let aborts = 0;
    const fetchFn: FetchLike = (input, init) => {
      if (input.endsWith('/abort_request')) aborts++;
      return globalThis.fetch(input, init);
    };
    return { c: new DirectClient({ engineUrls: [sim.url], clock, fetch: fetchFn }), aborts: () => aborts };
  }

  it('until it lands: the caller gets its partial output, and the re-sends stop with the answer', async () => {
    const clock = new ManualClock();
    const { c, aborts } = counted(clock);
    const before = sim.stats().aborted;
    sim.arrivals.hold();
    try {
      const answer = c.generate({
        ...long,
        rid: 'early-direct',
        sampling_params: { max_new_tokens: 300, ignore_eos: true },
      });
      // The race: the engine has the request but has not registered its rid, so it drops the abort.
      await waitFor(() => sim.arrivals.waiting === 1);
      expect(await c.abort('early-direct')).toBe(true);
      // Fails fast (no re-send scheduled) instead of at the test's timeout.
      await clock.untilPending(1, 10_000);
      expect(clock.pendingDelays()).toEqual([RESEND_FIRST_MS]);
      sim.arrivals.release();
      await waitFor(() => sim.stats().running + sim.stats().waiting === 1);
      expect(sim.stats().aborted).toBe(before);
      // Without the re-send the request would run its 300 tokens and end with finish_reason length.
      await clock.advance(RESEND_FIRST_MS);
      const out = GenerateResponseSchema.parse(await answer);
      expect(out.meta_info.finish_reason?.type).toBe('abort');
      expect(out.meta_info.completion_tokens).toBeLessThan(300);
      expect(sim.stats().aborted).toBe(before + 1);
      await waitFor(() => c.abortsResending === 0);
      expect(clock.pending).toBe(0);
      expect(aborts()).toBe(2);
    } finally {
      sim.arrivals.release();
      await c.close();
    }
  });

  it('bounded: backing off on the clock to RESEND_MAX_MS, RESEND_LIMIT times at most', async () => {
    const clock = new ManualClock();
    const { c, aborts } = counted(clock);
    sim.arrivals.hold();
    try {
      const answer = c.generate({ ...long, rid: 'never-registered' });
      await waitFor(() => sim.arrivals.waiting === 1);
      expect(await c.abort('never-registered')).toBe(true);
      const delays: number[] = [];
      for (let sent = 1; sent <= RESEND_LIMIT; sent++) {
        await clock.untilPending(1);
        const [delay] = clock.pendingDelays() as [number];
        delays.push(delay);
        await clock.advance(delay);
        await waitFor(() => aborts() === sent + 1);
      }
      await waitFor(() => c.abortsResending === 0);
      expect(clock.pending).toBe(0);
      expect(delays.slice(0, 6)).toEqual([25, 50, 100, 200, 400, 400]);
      expect(Math.max(...delays)).toBe(RESEND_MAX_MS);
      expect(aborts()).toBe(1 + RESEND_LIMIT);
      // Registered at last, it is still running: a fresh abort reaches it.
      sim.arrivals.release();
      await waitFor(() => sim.stats().running + sim.stats().waiting === 1);
      expect(await c.abort('never-registered')).toBe(true);
      expect(GenerateResponseSchema.parse(await answer).meta_info.finish_reason?.type).toBe('abort');
    } finally {
      sim.arrivals.release();
      await c.close();
    }
  });
});

describe('DirectClient.abort: an aborted request is not sent again elsewhere', { timeout: 30_000 }, () => {
  it('its engine answers 503 after the abort: the caller gets that error, the other replica no request', async () => {
    const sim = await startSimServer({ host: '127.0.0.1', port: 0 });
    // An engine going away: it holds the generation until the abort comes, then answers it 503.
    const held: http.ServerResponse[] = [];
    const stub = http.createServer((req, res) => {
      req.resume();
      if (req.url === '/generate') held.push(res);
      else {
        res.writeHead(200).end();
        for (const r of held.splice(0)) r.writeHead(503, { 'content-type': 'application/json' }).end('{}');
      }
    });
    await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
    const stubUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
    const c = new DirectClient({ engineUrls: [stubUrl, sim.url], clock: new ManualClock() });
    try {
      await sim.ready;
      const answer = c.generate({ ...long, rid: 'aborted-then-503' }).catch((e: unknown) => e);
      await waitFor(() => held.length === 1);
      expect(await c.abort('aborted-then-503')).toBe(true);
      const error = await answer;
      expect(error).toBeInstanceOf(UisError);
      expect((error as UisError).code).toBe('engine_unavailable');
      expect(sim.stats().requests).toBe(0);
    } finally {
      await c.close();
      stub.closeAllConnections();
      await new Promise((resolve) => stub.close(resolve));
      await sim.close();
    }
  });
});
