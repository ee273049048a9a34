import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isUisError } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SGLangEngine } from './engine.ts';
import { ENGINE_FAULTS, type EngineFault, type EngineFaultName, engineReply } from './testing.ts';

/** Every control call the manager makes through SGLangEngine, against an engine that answers badly in each way
 * seen in the field: each must end in an error with a stable code whose message names the engine's URL and
 * endpoint, within the engine's control deadline (never the client's 1 h idle timeout). */
type Fault = EngineFault;
type FaultName = EngineFaultName;
const FAULTS = ENGINE_FAULTS;

interface Call {
  path: string;
  run: (e: SGLangEngine) => Promise<unknown>;
  /** Codes that differ from the default of a JSON endpoint. */
  codes?: Partial<Record<FaultName, string>>;
}

/** The default outcome of a JSON endpoint. */
const JSON_CODES: Record<FaultName, string> = {
  not_json: 'engine_bad_response',
  success_yes: 'engine_bad_response',
  list: 'engine_bad_response',
  null: 'engine_bad_response',
  html_500: 'engine_http_error',
  html_400: 'engine_http_error',
  success_false: 'engine_bad_response',
  truncated: 'engine_stream_error',
  reset: 'engine_unreachable',
  silent: 'engine_timeout',
};

/** Endpoints whose body SGLang leaves empty or `null`: only an explicit `success: false` is a refusal. */
const FREE_BODY = {
  not_json: 'ok',
  success_yes: 'ok',
  list: 'ok',
  null: 'ok',
  success_false: 'engine_refused',
};
const WEIGHTS = { success_false: 'weight_update_failed' };

const CALLS: Record<string, Call> = {
  release: { path: '/release_memory_occupation', run: (e) => e.releaseMemory(), codes: FREE_BODY },
  resume: { path: '/resume_memory_occupation', run: (e) => e.wake(['weights']), codes: FREE_BODY },
  drain_abort: {
    path: '/pause_generation',
    run: (e) => e.drain({ policy: 'abort', deadlineMs: 1_000 }),
  },
  weight_version: { path: '/get_weight_version', run: (e) => e.weightVersion() },
  disk_update: {
    path: '/update_weights_from_disk',
    run: (e) => e.updateWeights({ source: 'disk', modelPath: '/m2', weightVersion: 'v2' }),
    codes: WEIGHTS,
  },
  distributed_update: {
    path: '/update_weights_from_distributed',
    run: (e) =>
      e.updateWeights({
        source: 'distributed',
        weightVersion: 'v2',
        names: ['w'],
        dtypes: ['bf16'],
        shapes: [[1]],
      }),
    codes: WEIGHTS,
  },
  version_update: {
    path: '/update_weight_version',
    run: (e) => e.updateWeights({ source: 'version', weightVersion: 'v2' }),
    codes: WEIGHTS,
  },
  init_group: {
    path: '/init_weights_update_group',
    run: (e) =>
      e.initWeightsUpdateGroup({
        master_address: '10.0.0.1',
        master_port: 29500,
        rank_offset: 1,
        world_size: 3,
      }),
    codes: WEIGHTS,
  },
  destroy_group: {
    path: '/destroy_weights_update_group',
    run: (e) => e.destroyWeightsUpdateGroup({}),
    codes: WEIGHTS,
  },
};

/** A well-behaved engine for every path except the one under test, which answers with `fault`. */
let fault: { path: string; answer: Fault } | null = null;
let server: Server;
let baseUrl: string;

const healthy: Record<string, unknown> = {
  '/get_weight_version': { weight_version: 'v2' },
  '/get_load': [{ dp_rank: 0, num_reqs: 0, num_waiting_reqs: 0, num_tokens: 0 }],
  '/pause_generation': { message: 'Generation paused successfully.', status: 'ok' },
  '/continue_generation': { message: 'Generation continued successfully.', status: 'ok' },
  '/update_weights_from_disk': { success: true, message: 'ok', num_paused_requests: 0 },
  '/update_weight_version': { success: true, message: 'ok' },
};

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0] ?? '';
      if (fault && path === fault.path) return fault.answer(req, res);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(healthy[path] ?? { success: true, message: 'ok' }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const cases = Object.entries(CALLS).flatMap(([call, c]) =>
  (Object.keys(FAULTS) as FaultName[]).map((f) => ({
    call,
    fault: f,
    path: c.path,
    run: c.run,
    code: c.codes?.[f as keyof typeof c.codes] ?? JSON_CODES[f],
  })),
);

describe('SGLangEngine control calls against a badly answering engine', () => {
  it.each(cases)('$call when the engine answers $fault: $code', async ({ fault: f, path, run, code }) => {
    fault = { path, answer: FAULTS[f] };
    // Only the silent engine is about the deadline; any other answer must be read as what it is, so a loopback
    // answer slowed past a short deadline on a loaded machine must not turn into engine_timeout.
    const deadlineMs = f === 'silent' ? 300 : 30_000;
    const engine = new SGLangEngine({
      engineId: 'm/0',
      baseUrl,
      controlTimeoutMs: deadlineMs,
      weightUpdateTimeoutMs: deadlineMs,
      flushDeadlineMs: 1_000,
    });
    try {
      const t0 = Date.now();
      const outcome = await run(engine).then(
        () => 'ok',
        (e: unknown) => e,
      );
      if (code === 'ok') {
        expect(outcome).toBe('ok');
        return;
      }
      if (!isUisError(outcome)) throw new Error(`expected a UisError, got ${String(outcome)}`);
      expect(outcome.code).toBe(code);
      expect(outcome.message).toContain(`${baseUrl}${path}`);
      expect(Date.now() - t0).toBeLessThan(5_000);
    } finally {
      fault = null;
      await engine.shutdown();
    }
  });

  it('a flush retried against a silent engine gives up at its deadline, not at the idle timeout', async () => {
    fault = { path: '/flush_cache', answer: FAULTS.silent };
    const engine = new SGLangEngine({ engineId: 'm/0', baseUrl, flushDeadlineMs: 300 });
    try {
      const t0 = Date.now();
      const e = await engine.sleep().catch((err: unknown) => err);
      expect(isUisError(e) && [e.code, e.message.includes(`${baseUrl}/flush_cache`)]).toEqual([
        'engine_timeout',
        true,
      ]);
      expect(Date.now() - t0).toBeLessThan(5_000);
    } finally {
      fault = null;
      await engine.shutdown();
    }
  });

  it("reads an older engine's {success: false} without num_paused_requests as the failure it reports", async () => {
    fault = {
      path: '/update_weights_from_disk',
      answer: engineReply(400, 'application/json', '{"success":false,"message":"file not found: /m2"}'),
    };
    const engine = new SGLangEngine({ engineId: 'm/0', baseUrl });
    try {
      const e = await engine
        .updateWeights({ source: 'disk', modelPath: '/m2', weightVersion: 'v2' })
        .catch((err: unknown) => err);
      expect(isUisError(e) && e.code).toBe('weight_update_failed');
      expect(String(e)).toContain('file not found: /m2');
    } finally {
      fault = null;
      await engine.shutdown();
    }
  });
});
