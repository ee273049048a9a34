import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SGLangClient, SGLangEngine } from '@uis/sglang-engine';
import {
  ENGINE_FAULTS,
  type EngineFault,
  type EngineFaultName,
  engineReply,
  waitFor,
} from '@uis/sglang-engine/testing';
import { type InferenceRoleSpec, isUisError } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchRunner } from './batch-runner.ts';
import { BatchStore } from './batch-store.ts';
import { InferenceManager } from './inference-manager.ts';
import type { Launcher, LaunchRequest } from './launchers.ts';
import { MemoryLogger } from './runtime.ts';
import { openStore } from './store.ts';
import { layoutRole, planConfig } from './testing.ts';

/** The manager against an engine that answers one endpoint badly: the failure is a coded error naming the
 * engine's URL and endpoint, the replica ends in a state the operator can see (and retry from), the process does
 * not crash, and a deferred batch keeps its samples for the next run. */
type Fault = EngineFault;
type FaultName = EngineFaultName;
const FAULTS = ENGINE_FAULTS;
const ALL = Object.keys(FAULTS) as FaultName[];

/** A scripted SGLang engine: right answers everywhere, except `faults[path]`. Tracks its weight version. */
class FakeEngine {
  readonly faults = new Map<string, Fault>();
  version = 'v1';
  server!: Server;
  url = '';

  async listen(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString();
      });
      req.on('end', () => {
        const path = (req.url ?? '').split('?')[0] ?? '';
        const f = this.faults.get(path);
        if (f) f(req, res);
        else this.respond(req, res, path, body);
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The right answer of `path`. */
  respond(_req: IncomingMessage, res: ServerResponse, path: string, body: string): void {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(this.answer(path, body)));
  }

  private answer(path: string, body: string): unknown {
    switch (path) {
      case '/get_weight_version':
        return { weight_version: this.version };
      case '/get_load':
        return [{ dp_rank: 0, num_reqs: 0, num_waiting_reqs: 0, num_tokens: 0 }];
      case '/pause_generation':
      case '/continue_generation':
        return { message: 'done', status: 'ok' };
      case '/update_weights_from_disk':
        this.version = (JSON.parse(body) as { weight_version: string }).weight_version;
        return { success: true, message: 'ok', num_paused_requests: 0 };
      case '/v1/chat/completions':
        return {
          id: 'c',
          object: 'chat.completion',
          created: 0,
          model: 'judge',
          choices: [
            { index: 0, message: { role: 'assistant', content: 'Judgement: 1' }, finish_reason: 'stop' },
          ],
          usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 },
        };
      default:
        return null;
    }
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/** How long a call may take before it counts as unanswered: a `silent` fault waits it out, and every right answer
 * must beat it, also on a loaded machine (300 ms did not leave room for that). */
const CALL_TIMEOUT_MS = 2_000;

/** Attaches every replica to the fake engine with short control deadlines. */
class FakeLauncher implements Launcher {
  readonly kind = 'fake';
  readonly ownsProcesses = false;
  constructor(private readonly url: string) {}
  async create(req: LaunchRequest): Promise<SGLangEngine> {
    return new SGLangEngine({
      engineId: req.replica.engine_id,
      baseUrl: this.url,
      pollMs: 20,
      controlTimeoutMs: CALL_TIMEOUT_MS,
      weightUpdateTimeoutMs: CALL_TIMEOUT_MS,
      flushDeadlineMs: 10_000,
    });
  }
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(opts: { healthIntervalMs?: number } = {}) {
  const fake = await new FakeEngine().listen();
  cleanups.push(() => fake.close());
  const { plan, roles } = planConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 2 }] },
    training: { actor_gpus: 0 },
    roles: {
      rollout: layoutRole(
        'decoupled',
        { name: 'policy', weight_source: 'disk', engine_groups: [{ num_gpus: 2, gpus_per_engine: 2 }] },
        { routing: {} },
      ),
    },
  });
  const base = roles.rollout as InferenceRoleSpec;
  // Offload on, so a drain releases memory through the engine.
  const role = { ...base, deployment: { ...base.deployment, offload: true } };
  const logger = new MemoryLogger();
  const m = new InferenceManager({
    role,
    placements: plan.placements,
    pools: plan.pools,
    launcher: new FakeLauncher(fake.url),
    logger,
    options: {
      healthIntervalMs: opts.healthIntervalMs ?? 3_600_000,
      healthTimeoutMs: CALL_TIMEOUT_MS,
      failuresToDead: 2,
      drainDeadlineMs: 10_000,
    },
  });
  cleanups.push(() => m.shutdown());
  await m.start();
  const replica = () => m.snapshot().models.policy?.replicas[0];
  return { fake, m, logger, replica };
}

const deadReason = (logger: MemoryLogger) =>
  String((logger.lines.find((l) => l.msg === 'replica dead')?.obj as { reason?: string })?.reason);

describe('InferenceManager against an engine that answers badly', () => {
  it.each(ALL)(
    'a weight update answered %s fails with the endpoint named; the replica stays at its version, visible, and a retry works',
    async (fault) => {
      const { fake, m, replica } = await setup();
      fake.faults.set('/update_weights_from_disk', FAULTS[fault]);
      const e = await m
        .updateWeights('policy', { source: 'disk', model_path: '/m2', weight_version: 'v2' })
        .catch((err: unknown) => err);
      expect(isUisError(e) && e.code).toBe('weight_update_failed');
      const [engine] = (e as { details: { engines: Array<{ ok: boolean; error: string }> } }).details.engines;
      expect(engine?.ok).toBe(false);
      expect(engine?.error).toContain(`${fake.url}/update_weights_from_disk`);
      expect(replica()).toMatchObject({ state: 'ready', weight_version: 'v1' });
      expect(m.snapshot().models.policy?.target_weight_version).toBe('v1');
      expect(m.eligibleEngines('policy')).toHaveLength(1);

      fake.faults.clear();
      fake.version = 'v1';
      const ok = await m.updateWeights('policy', { source: 'disk', model_path: '/m2', weight_version: 'v2' });
      expect(ok.engines).toEqual([{ engine_id: 'policy/0', ok: true, weight_version: 'v2' }]);
      expect(m.eligibleEngines('policy')).toHaveLength(1);
    },
  );

  // Bodies SGLang leaves empty (`null`) cannot be checked beyond an explicit refusal.
  const releaseFaults = ALL.filter((f) => !['not_json', 'success_yes', 'list', 'null'].includes(f));
  it.each(releaseFaults)(
    'a memory release answered %s is never counted as released: the replica is published dead with the endpoint in the reason',
    async (fault) => {
      const { fake, m, logger, replica } = await setup();
      fake.faults.set('/release_memory_occupation', FAULTS[fault]);
      const report = await m.drain();
      expect(report.memoryReleased).toBe(false);
      expect(replica()).toMatchObject({ state: 'dead', memory_released: false });
      expect(deadReason(logger)).toContain(`${fake.url}/release_memory_occupation`);
      expect(m.registry.snapshot().models.policy?.engines[0]?.state).toBe('dead');
    },
  );

  const healthFaults: FaultName[] = ['html_500', 'truncated', 'reset', 'silent'];
  it.each(healthFaults)(
    'health checks answered %s mark the replica dead with the last failure and its endpoint',
    async (fault) => {
      const { fake, logger, replica } = await setup({ healthIntervalMs: 50 });
      fake.faults.set('/health', FAULTS[fault]);
      await waitFor(() => replica()?.state === 'dead', 30_000, 'the replica marked dead');
      expect(deadReason(logger)).toMatch(/failed health checks \(last: .*\/health/);
      expect(deadReason(logger)).toContain(fake.url);
    },
  );
});

describe('BatchRunner against a scorer that answers badly', () => {
  const scorerFaults: FaultName[] = ['not_json', 'list', 'null', 'html_500', 'truncated', 'reset', 'silent'];
  it.each(scorerFaults)(
    'a scorer answering %s leaves the batch sealed with its staged results and the reason; the next run commits it',
    async (fault) => {
      const fake = await new FakeEngine().listen();
      cleanups.push(() => fake.close());
      const db = openStore(':memory:');
      cleanups.push(async () => db.close());
      const store = new BatchStore(db);
      const client = new SGLangClient(fake.url);
      cleanups.push(() => client.close());
      const runner = new BatchRunner({
        store,
        targets: () => [{ engineId: 'judge/0', servedModelName: 'judge', client }],
        concurrency: 1,
        requestTimeoutMs: CALL_TIMEOUT_MS,
      });
      const b = store.create({ kind: 'genrm_score' });
      store.addSamples(b.id, {
        samples: ['a', 'b', 'c'].map((id) => ({
          sample_id: id,
          input: { messages: [{ role: 'user', content: `judge ${id}` }] },
        })),
      });
      store.seal(b.id);
      // The first sample is scored, then the engine goes bad.
      let calls = 0;
      fake.faults.set('/v1/chat/completions', (req, res) =>
        ++calls === 1 ? fake.respond(req, res, '/v1/chat/completions', '') : FAULTS[fault](req, res),
      );
      const e = await runner.run(b.id).catch((err: unknown) => err);
      expect(isUisError(e) && e.code).toBe('batch_sample_failed');
      expect(String(e)).toContain(`${fake.url}/v1/chat/completions`);
      const after = store.get(b.id);
      expect([after.state, after.samples, after.results]).toEqual(['sealed', 3, 1]);
      expect(after.reason).toContain(`${fake.url}/v1/chat/completions`);
      expect(store.samples(b.id).every((s) => s.output === null)).toBe(true);

      fake.faults.clear();
      const done = await runner.run(b.id);
      expect([done.batch.state, done.scored, done.reused]).toEqual(['committed', 2, 1]);
      expect(store.samples(b.id).map((s) => s.output)).toEqual(
        Array.from({ length: 3 }, () => ({ response: 'Judgement: 1', score: 1 })),
      );
    },
  );

  it('a sample every replica refuses (SGLang 400: prompt over the context length) fails the batch instead of requeuing it into every later scorer phase', async () => {
    const fakes = [await new FakeEngine().listen(), await new FakeEngine().listen()];
    const db = openStore(':memory:');
    cleanups.push(async () => db.close());
    const store = new BatchStore(db);
    const clients = fakes.map((f) => new SGLangClient(f.url));
    for (const [i, f] of fakes.entries())
      cleanups.push(
        () => f.close(),
        () => clients[i]!.close(),
      );
    const runner = new BatchRunner({
      store,
      targets: () =>
        clients.map((client, i) => ({ engineId: `judge/${i}`, servedModelName: 'judge', client })),
      concurrency: 1,
    });
    const tooLong = engineReply(
      400,
      'application/json',
      '{"object":"error","message":"The input (9000 tokens) is longer than the model\'s context length (8192 tokens).","type":"BadRequestError","code":400}',
    );
    const asked: number[] = [];
    for (const [i, f] of fakes.entries())
      f.faults.set('/v1/chat/completions', (req, res) => {
        asked.push(i);
        tooLong(req, res);
      });
    const b = store.create({ kind: 'genrm_score' });
    store.addSamples(b.id, {
      samples: [{ sample_id: 'long', input: { messages: [{ role: 'user', content: 'x' }] } }],
    });
    store.seal(b.id);
    const e = await runner.run(b.id).catch((err: unknown) => err);
    expect(isUisError(e) && e.code).toBe('batch_sample_failed');
    expect(store.get(b.id)).toMatchObject({
      state: 'failed',
      reason: expect.stringContaining('context length'),
    });
    // The answer is the sample's, not the replica's: no second replica is asked.
    expect(asked).toHaveLength(1);
    expect(store.list({ state: 'sealed' })).toEqual([]);
  });

  it('no eligible scorer replica leaves the batch sealed, not failed', async () => {
    const db = openStore(':memory:');
    cleanups.push(async () => db.close());
    const store = new BatchStore(db);
    const runner = new BatchRunner({ store, targets: () => [] });
    const b = store.create({ kind: 'genrm_score' });
    store.addSamples(b.id, {
      samples: [{ sample_id: 's', input: { messages: [{ role: 'user', content: 'x' }] } }],
    });
    store.seal(b.id);
    const e = await runner.run(b.id).catch((err: unknown) => err);
    expect(isUisError(e) && e.code).toBe('no_scorer_replica');
    expect(store.get(b.id)).toMatchObject({
      state: 'sealed',
      reason: expect.stringContaining('no eligible'),
    });
  });
});
