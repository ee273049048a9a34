import { type ChildProcess, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { ManualClock, waitFor } from '@uis/sglang-engine/testing';
import { type SimServer, startSimServer } from '@uis/sglang-sim';
import { type DiscoveryEngine, type DiscoverySnapshot, UisError } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectClient } from './direct-client.ts';
import type { Attempt } from './direct-options.ts';

const SIM_BIN = fileURLToPath(new URL('../../sglang-sim/bin/sglang-sim.mjs', import.meta.url));

interface SimProcess {
  url: string;
  child: ChildProcess;
}

/** Starts a real sglang-sim process on an ephemeral port and waits for SGLang's ready line. */
function spawnSim(args: string[] = []): Promise<SimProcess> {
  const child = spawn(
    process.execPath,
    [
      SIM_BIN,
      '--model-path',
      'sim/tiny',
      '--served-model-name',
      'tiny',
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      ...args,
    ],
    { detached: true, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return new Promise((resolve, reject) => {
    let log = '';
    let url: string | undefined;
    const timer = setTimeout(() => reject(new Error(`sglang-sim did not start:\n${log}`)), 60_000);
    child.stderr!.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      url ??= /Uvicorn running on (http:\/\/[^\s]+)/.exec(log)?.[1];
      if (url !== undefined && log.includes('The server is fired up and ready to roll!')) {
        clearTimeout(timer);
        resolve({ url, child });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sglang-sim exited with ${code}:\n${log}`));
    });
  });
}

function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** A gateway stand-in: GET /rollout/engines with `wait_revision` long-poll, POST /rollout/generate for the
 * fallback. `ignoreWait` makes it answer at once, as a gateway without long-poll would. */
class DiscoveryServer {
  server = http.createServer((req, res) => this.handle(req, res));
  snapshot: DiscoverySnapshot;
  ignoreWait = false;
  longPolls = 0;
  gatewayCalls = 0;
  private waiters = new Set<() => void>();

  constructor(engines: DiscoveryEngine[]) {
    this.snapshot = {
      schema_version: 2,
      role: 'rollout',
      topology_revision: 1,
      registry_epoch: 'epoch-1',
      phase: null,
      models: { policy: { state: 'ready', router_url: null, engines, served_model_name: 'tiny' } },
      routing: {
        default_model: 'policy',
        route_keys: { gsm8k: 'policy' },
        aliases: { actor: 'policy' },
        policy: 'round_robin',
        model_policies: {},
      },
    };
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/rollout`;
  }

  publish(engines: DiscoveryEngine[]): void {
    const model = this.snapshot.models.policy!;
    this.snapshot = {
      ...this.snapshot,
      topology_revision: this.snapshot.topology_revision + 1,
      models: { policy: { ...model, engines } },
    };
    for (const wake of this.waiters) wake();
  }

  async close(): Promise<void> {
    for (const wake of this.waiters) wake();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'POST' && url.pathname === '/rollout/generate') {
      this.gatewayCalls++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: 'via gateway' }));
      return;
    }
    if (url.pathname !== '/rollout/engines') {
      res.writeHead(404).end();
      return;
    }
    const send = (): void => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(this.snapshot));
    };
    const wait = url.searchParams.get('wait_revision');
    const epoch = url.searchParams.get('registry_epoch');
    const stale = epoch !== null && epoch !== this.snapshot.registry_epoch;
    if (wait === null || this.ignoreWait || stale || this.snapshot.topology_revision > Number(wait)) {
      send();
      return;
    }
    this.longPolls++;
    const timeout = Number(url.searchParams.get('timeout_s') ?? '30') * 1000;
    const done = () => {
      clearTimeout(timer);
      this.waiters.delete(done);
      if (!res.writableEnded) send();
    };
    const timer = setTimeout(done, timeout);
    this.waiters.add(done);
    res.on('close', () => {
      clearTimeout(timer);
      this.waiters.delete(done);
    });
  }
}

/** An engine that always answers 503 (overloaded / not ready yet). */
async function unavailableEngine(): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server = http.createServer((req, res) => {
    hits++;
    req.resume();
    res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"busy"}}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits: () => hits,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function eng(i: number, url: string, extra: Partial<DiscoveryEngine> = {}): DiscoveryEngine {
  return { engine_id: `policy/${i}`, base_url: url, state: 'ready', direct_eligible: true, ...extra };
}

interface GenerateOut {
  text: string;
  meta_info: { id: string; finish_reason: unknown };
}

const sims: SimProcess[] = [];
const clients: DirectClient[] = [];
function client(...args: ConstructorParameters<typeof DirectClient>): DirectClient {
  const c = new DirectClient(...args);
  clients.push(c);
  return c;
}

beforeAll(async () => {
  sims.push(...(await Promise.all([spawnSim(), spawnSim(), spawnSim()])));
}, 90_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  for (const s of sims) killGroup(s.child);
});

const body = { text: 'The answer is', sampling_params: { max_new_tokens: 4, ignore_eos: true } };

// Engines are child processes: room for a loaded machine beyond the 5 s default.
describe('DirectClient against sglang-sim processes', { timeout: 30_000 }, () => {
  let discovery: DiscoveryServer;
  let discoveryUrl: string;
  beforeAll(async () => {
    discovery = new DiscoveryServer(sims.map((s, i) => eng(i, s.url)));
    discoveryUrl = `${await discovery.listen()}/engines`;
  });
  afterAll(() => discovery.close());

  it('resolves and selects locally, calls engines directly, round robin across replicas', async () => {
    const c = client({ discoveryUrl });
    await c.start();
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const out = await c.generate<GenerateOut>({ ...body, model: 'actor' });
      expect(out.text.length).toBeGreaterThan(0);
      seen.push(c.lastAttempts[0]!.engineId!);
    }
    expect(seen).toEqual(['policy/0', 'policy/1', 'policy/2', 'policy/0', 'policy/1', 'policy/2']);
  });

  it('concurrent calls each get their own attempts (options.attempts), in the order they were routed', async () => {
    const c = client({ discoveryUrl });
    await c.start();
    const perCall = Array.from({ length: 6 }, () => [] as Attempt[]);
    await Promise.all(perCall.map((attempts) => c.generate({ ...body, model: 'actor' }, { attempts })));
    expect(perCall.map((a) => a.map((x) => `${x.engineId}:${x.outcome}`))).toEqual([
      ['policy/0:ok'],
      ['policy/1:ok'],
      ['policy/2:ok'],
      ['policy/0:ok'],
      ['policy/1:ok'],
      ['policy/2:ok'],
    ]);
  });

  it('chat completions: model (alias or route_key) is rewritten to the served name', async () => {
    const c = client({ discoveryUrl });
    await c.start();
    const out = await c.chatCompletions<{ model: string; choices: Array<{ message: { content: string } }> }>({
      model: 'actor',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 3,
    });
    expect(out.model).toBe('tiny');
    expect(out.choices[0]!.message.content.length).toBeGreaterThan(0);
    const viaKey = await c.chatCompletions<{ model: string }>(
      { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
      { routeKey: 'gsm8k' },
    );
    expect(viaKey.model).toBe('tiny');
  });

  it('an unknown model is a 400 from local routing; no engine is called', async () => {
    const c = client({ discoveryUrl });
    await c.start();
    const e = await c.generate({ ...body, model: 'nope' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UisError);
    expect(e).toMatchObject({ code: 'model_not_served', status: 400 });
    expect(c.lastAttempts).toEqual([]);
  });

  it('a 400 from the engine is never retried', async () => {
    const c = client({ discoveryUrl });
    await c.start();
    const e = await c
      .chatCompletions({ messages: [{ role: 'user', content: 'hi' }], n: 2 })
      .catch((x: unknown) => x);
    expect(e).toMatchObject({ code: 'engine_rejected', status: 400 });
    expect(c.lastAttempts).toHaveLength(1);
  });

  it('streams SSE data chunks of /generate and chat completions', async () => {
    const c = client({ discoveryUrl });
    await c.start();
    const chunks: string[] = [];
    for await (const data of c.generateStream({
      text: 'stream me',
      sampling_params: { max_new_tokens: 5, ignore_eos: true },
    })) {
      chunks.push(data);
    }
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    const last = JSON.parse(chunks[chunks.length - 1]!) as GenerateOut;
    expect(last.meta_info.finish_reason).toMatchObject({ type: 'length' });
    const chat: string[] = [];
    for await (const data of c.chatCompletionsStream({
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
    })) {
      chat.push(data);
    }
    expect(chat.length).toBeGreaterThanOrEqual(2);
    expect((JSON.parse(chat[0]!) as { object: string }).object).toBe('chat.completion.chunk');
  });

  it('picks up a topology change via long-poll, not by polling', async () => {
    // A 60 s polling interval: only a long-poll wake-up can see changes within the bound.
    const c = client({ discoveryUrl, longPollTimeoutS: 20, pollIntervalMs: 60_000 });
    await c.start();
    const delays: number[] = [];
    for (let round = 0; round < 5; round++) {
      const before = discovery.longPolls;
      // Wait until the client's long-poll is parked at the server.
      await waitFor(() => discovery.longPolls > before);
      expect(discovery.longPolls).toBeGreaterThan(before);
      const target = discovery.snapshot.topology_revision + 1;
      const seen = new Promise<number>((resolve) => {
        const off = c.onSnapshot((s) => {
          if (s.topology_revision >= target) {
            off();
            resolve(performance.now());
          }
        });
      });
      const t0 = performance.now();
      discovery.publish(sims.map((s, i) => eng(i, s.url)));
      delays.push((await seen) - t0);
    }
    expect(c.watchMode).toBe('long_poll');
    delays.sort((a, b) => a - b);
    // The client wakes when the server answers: milliseconds on an idle machine. The bound leaves room for a
    // machine loaded past its cores (the 1-minute load average, consulted before, lags a sudden load) and is
    // still 60x below the polling interval.
    expect(delays[2], `delays ${delays.map((d) => d.toFixed(1)).join(', ')} ms`).toBeLessThan(1000);
  });

  it('falls back to plain polling when the gateway ignores wait_revision', async () => {
    const plain = new DiscoveryServer(sims.map((s, i) => eng(i, s.url)));
    plain.ignoreWait = true;
    const url = `${await plain.listen()}/engines`;
    try {
      const c = client({ discoveryUrl: url, pollIntervalMs: 50 });
      await c.start();
      const seen = new Promise<void>((resolve) => c.onSnapshot(() => resolve()));
      // The switch follows the first answer that ignored wait_revision; wait for it, not for a fixed 120 ms.
      await waitFor(() => c.watchMode === 'poll');
      expect(c.watchMode).toBe('poll');
      plain.publish(sims.map((s, i) => eng(i, s.url)));
      await seen;
      expect(c.snapshot!.topology_revision).toBe(2);
      await c.close();
    } finally {
      await plain.close();
    }
  });

  it('adopts a snapshot of a new registry epoch even when its revision is lower', async () => {
    const c = client({ discoveryUrl });
    await c.start();
    const seen = new Promise<DiscoverySnapshot>((resolve) => c.onSnapshot(resolve));
    discovery.snapshot = { ...discovery.snapshot, registry_epoch: 'epoch-2', topology_revision: 0 };
    discovery.publish(sims.map((s, i) => eng(i, s.url)));
    const next = await seen;
    expect(next).toMatchObject({ registry_epoch: 'epoch-2', topology_revision: 1 });
  });

  it('a 503 from an engine: one refresh and one retry on another replica', async () => {
    const busy = await unavailableEngine();
    const d = new DiscoveryServer([eng(0, busy.url), eng(1, sims[0]!.url)]);
    const url = `${await d.listen()}/engines`;
    try {
      const c = client({ discoveryUrl: url });
      await c.start();
      const out = await c.generate<GenerateOut>(body);
      expect(out.text.length).toBeGreaterThan(0);
      expect(c.lastAttempts.map((a) => a.outcome)).toEqual(['unavailable', 'ok']);
      expect(busy.hits()).toBe(1);
      await c.close();
    } finally {
      await d.close();
      await busy.close();
    }
  });

  it('gateway fallback is off by default and opt-in', async () => {
    const busy = await unavailableEngine();
    const d = new DiscoveryServer([eng(0, busy.url)]);
    const url = `${await d.listen()}/engines`;
    try {
      const off = client({ discoveryUrl: url });
      await off.start();
      await expect(off.generate(body)).rejects.toMatchObject({ code: 'engine_unavailable', status: 503 });
      expect(d.gatewayCalls).toBe(0);
      const on = client({ discoveryUrl: url, gatewayFallback: true });
      await on.start();
      expect(await on.generate(body)).toEqual({ text: 'via gateway' });
      expect(d.gatewayCalls).toBe(1);
      await Promise.all([off.close(), on.close()]);
    } finally {
      await d.close();
      await busy.close();
    }
  });

  it('a model that is not ready is a 503 with retry guidance and no engine call', async () => {
    const d = new DiscoveryServer([eng(0, sims[0]!.url, { state: 'sleeping', direct_eligible: false })]);
    d.snapshot.models.policy!.state = 'sleeping';
    const url = `${await d.listen()}/engines`;
    try {
      const c = client({ discoveryUrl: url });
      await c.start();
      const e = (await c.generate(body).catch((x: unknown) => x)) as UisError;
      expect(e).toMatchObject({ code: 'model_not_ready', status: 503 });
      expect((e.details as { retry_after_s: number }).retry_after_s).toBeGreaterThan(0);
      expect(c.lastAttempts).toEqual([]);
      await c.close();
    } finally {
      await d.close();
    }
  });

  it('keeps routing on the last good snapshot while discovery is down', async () => {
    const d = new DiscoveryServer(sims.slice(0, 2).map((s, i) => eng(i, s.url)));
    const url = `${await d.listen()}/engines`;
    const c = client({ discoveryUrl: url, pollIntervalMs: 20, longPollTimeoutS: 1 });
    await c.start();
    await d.close();
    await waitFor(() => c.lastWatchError !== undefined);
    expect(c.lastWatchError).toBeDefined();
    const out = await c.generate<GenerateOut>(body);
    expect(out.text.length).toBeGreaterThan(0);
    await c.close();
  });

  it('a static engine list needs no discovery', async () => {
    const c = client({ engineUrls: sims.slice(0, 2).map((s) => `${s.url}/`), model: 'tiny' });
    expect((await c.start()).registry_epoch).toBe('static');
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      await c.chatCompletions({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
      ids.push(c.lastAttempts[0]!.engineId!);
    }
    expect(ids).toEqual(['tiny/0', 'tiny/1', 'tiny/0', 'tiny/1']);
  });

  // Last in this block: it kills a process.
  it('a replica killed mid-test is skipped after one failed request, until its cool-down ends on the clock', async () => {
    const victims = await Promise.all([spawnSim(), spawnSim()]);
    sims.push(...victims);
    const d = new DiscoveryServer(victims.map((s, i) => eng(i, s.url)).concat(eng(2, sims[0]!.url)));
    const url = `${await d.listen()}/engines`;
    try {
      const clock = new ManualClock();
      const c = client({ discoveryUrl: url, clock });
      await c.start();
      for (let i = 0; i < 3; i++) await c.generate(body);
      killGroup(victims[0]!.child);
      await new Promise<void>((resolve) => victims[0]!.child.once('exit', () => resolve()));
      const attempts: string[] = [];
      for (let i = 0; i < 9; i++) {
        const out = await c.generate<GenerateOut>(body);
        expect(out.text.length).toBeGreaterThan(0);
        for (const a of c.lastAttempts) attempts.push(`${a.engineId}:${a.outcome}`);
      }
      // Discovery still lists the dead replica (the manager has not noticed yet): the client tried it once.
      expect(attempts.filter((a) => a.startsWith('policy/0'))).toEqual(['policy/0:connection_error']);
      expect(attempts.filter((a) => a.endsWith(':ok'))).toHaveLength(9);
      // The cool-down (10 s) is the client's clock's: once it passed, the listed replica gets one more try.
      await clock.advance(10_000);
      const after: string[] = [];
      for (let i = 0; i < 3; i++) {
        await c.generate<GenerateOut>(body);
        for (const a of c.lastAttempts) after.push(`${a.engineId}:${a.outcome}`);
      }
      expect(after.filter((a) => a.startsWith('policy/0'))).toEqual(['policy/0:connection_error']);
      await c.close();
    } finally {
      await d.close();
    }
  });
});

describe('DirectClient with a static engine list and a stream that fails', { timeout: 30_000 }, () => {
  let crashing: SimServer;
  beforeAll(async () => {
    // Serves one request, then dies after the first token of the next one.
    crashing = await startSimServer({
      host: '127.0.0.1',
      port: 0,
      simCrashAfter: 1,
      simDecodeUsPerToken: 5_000,
    });
    await crashing.ready;
  });
  afterAll(() => crashing.close());

  it('never replays a stream that already yielded data', async () => {
    const c = client({ engineUrls: [crashing.url] });
    await c.start();
    await c.generate(body);
    const got: string[] = [];
    const failure = await (async () => {
      for await (const d of c.generateStream({
        text: 'x',
        sampling_params: { max_new_tokens: 50, ignore_eos: true },
      }))
        got.push(d);
    })().catch((e: unknown) => e);
    expect(got.length).toBeGreaterThanOrEqual(1);
    expect(failure).toBeInstanceOf(Error);
    expect(c.lastAttempts).toHaveLength(1);
  });

  it('rejects bad engine URLs and bad option combinations with a 400', () => {
    expect(() => new DirectClient({ engineUrls: ['ftp://x'] })).toThrow(UisError);
    expect(() => new DirectClient({})).toThrow(/exactly one/);
  });
});
