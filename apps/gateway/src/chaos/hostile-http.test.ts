import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { gatewayOnSims, splitTestConfig } from '../testing/fixtures.ts';
import { RecordingEngine } from '../testing/recording-engine.ts';
import { within } from '../testing/uis-process.ts';

// Chaos: what a hostile or careless client sends. Loopback only; every server is stopped by the test's hooks.
const ADMIN = 'admin-secret-token';
const SERVING = 'serving-secret-token';
const ENGINE_KEY = 'engine-key-of-the-teacher';
const BUDGET = 32 * 1024 * 1024;
const DEADLINE_MS = 3000;

const config = splitTestConfig();
const teacher = config.roles.teacher?.models[0];
if (teacher === undefined) throw new Error('splitTestConfig has a teacher model');
teacher.engine_api_key = ENGINE_KEY;

const fakes: RecordingEngine[] = [];
afterAll(async () => {
  await Promise.allSettled(fakes.map((f) => f.close()));
});
const gw = gatewayOnSims({
  config,
  sim: { simDecodeUsPerToken: 1000 },
  server: {
    adminToken: ADMIN,
    servingToken: SERVING,
    bodyBudgetBytes: BUDGET,
    bodyTimeoutMs: DEADLINE_MS,
    healthProbeMs: 0,
    // The one credential header configured to reach the engines (an engine behind its own key check).
    passHeaders: ['Api-Key'],
  },
});

async function call(
  path: string,
  init: { method?: string; body?: string; headers?: Record<string, string> },
) {
  const r = await fetch(`${gw.url}${path}`, {
    method: init.method ?? 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${SERVING}`, ...init.headers },
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  const text = await r.text();
  let json: { error?: { code: string; path?: string } } | undefined;
  try {
    json = JSON.parse(text) as typeof json;
  } catch {
    json = undefined;
  }
  return { status: r.status, json, headers: r.headers };
}

async function register(role: string, model: string, modelPath: string): Promise<RecordingEngine> {
  const fake = await RecordingEngine.start({ modelPath });
  fakes.push(fake);
  const r = await call(`/admin/roles/${role}/models/${model}/engines`, {
    body: JSON.stringify({ url: fake.url }),
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  expect(r.status).toBe(200);
  return fake;
}

describe('chaos: no client credential reaches an engine', { timeout: 60_000 }, () => {
  it('Authorization (serving or admin token), Cookie, Proxy-Authorization and X-Api-Key are stripped; the configured Api-Key passes; the model engine key is added', async () => {
    const withKey = await register('teacher', 'math-teacher', '/models/teacher');
    const withoutKey = await register('rollout', 'policy', '/models/policy');
    const creds = (token: string) => ({
      authorization: `Bearer ${token}`,
      cookie: `session=${token}; uis=${token}`,
      'proxy-authorization': `Basic ${token}`,
      'x-api-key': token,
      'api-key': 'key-the-engine-checks',
    });
    for (const token of [SERVING, ADMIN]) {
      for (const [role, model] of [
        ['teacher', 'math-teacher'],
        ['rollout', 'policy'],
      ] as const) {
        for (const [path, body] of [
          ['generate', { model, text: 'hi', sampling_params: { max_new_tokens: 2 } }],
          ['v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }],
          [
            'v1/chat/completions',
            { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true },
          ],
        ] as const) {
          // Every engine of the model may be picked: ask until the registered one has answered once.
          for (let i = 0; i < 8; i++) {
            const r = await call(`/${role}/${path}`, { body: JSON.stringify(body), headers: creds(token) });
            expect(r.status).toBe(200);
          }
        }
      }
    }
    // Everything the engines saw: forwarded requests and the manager's own calls (health, flush, weights).
    const seenByTeacher = withKey.seen;
    const seenByRollout = withoutKey.seen;
    expect(seenByTeacher.length).toBeGreaterThan(0);
    expect(seenByRollout.length).toBeGreaterThan(0);
    for (const s of [...seenByTeacher, ...seenByRollout]) {
      expect(s.headers.cookie).toBeUndefined();
      expect(s.headers['x-api-key']).toBeUndefined();
      expect(s.headers['proxy-authorization']).toBeUndefined();
      for (const value of Object.values(s.headers).flat()) {
        expect(value).not.toContain(SERVING);
        expect(value).not.toContain(ADMIN);
      }
    }
    for (const s of seenByTeacher) expect(s.headers.authorization).toBe(`Bearer ${ENGINE_KEY}`);
    for (const s of seenByRollout) expect(s.headers.authorization).toBeUndefined();
    // Forwarded requests carry the passed header (the manager's own calls, health or flush, never had one).
    const forwarded = [...seenByTeacher, ...seenByRollout].filter((s) =>
      ['/generate', '/v1/chat/completions'].includes(s.path),
    );
    expect(forwarded.length).toBeGreaterThanOrEqual(2);
    for (const s of forwarded) expect(s.headers['api-key']).toBe('key-the-engine-checks');
  });
});

describe('chaos: deep JSON', { timeout: 60_000 }, () => {
  const deep = `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;

  it('a 100,000-deep body is 400 json_too_deep with its path on every route that takes a body', async () => {
    const fill = (p: string) =>
      p.replace(':role', 'rollout').replace(':model', 'policy').replace(/:\w+/g, 'x');
    const framework = gw.server.app.routes
      .filter((r) => r.method !== 'GET')
      .map((r) => fill(r.path).replace(/\/\*$/, '/drainModel'));
    const serving = [
      ...['rollout', 'genrm', 'teacher'].flatMap((role) =>
        ['generate', 'chat/completions', 'v1/chat/completions', 'v1/completions'].map((p) => `/${role}/${p}`),
      ),
      '/v1/chat/completions',
      '/v1/completions',
    ];
    const paths = [...new Set([...serving, ...framework, '/trpc/drainModel', '/no/such/route'])];
    expect(paths.filter((p) => p.startsWith('/admin/')).length).toBeGreaterThan(5);
    const answers = await Promise.all(
      paths.map(async (path) => {
        const r = await call(path, { body: deep, headers: { authorization: `Bearer ${ADMIN}` } });
        // OpenAI routes answer in OpenAI's error shape: the code is `code`, the path `param`.
        const e = r.json?.error as { code?: string; path?: string; param?: string } | undefined;
        return { path, status: r.status, code: e?.code, at: e?.path ?? e?.param };
      }),
    );
    for (const a of answers) {
      expect(a, a.path).toMatchObject({ status: 400, code: 'json_too_deep' });
      expect(a.at, a.path).toMatch(/^body\.a(\[0\]){127}$/);
    }
  });
});

/** Opens a raw connection, sends headers announcing `declared` bytes, then `sent` bytes of body, then stalls. */
async function stalledUpload(
  declared: number,
  sent: number,
): Promise<{ socket: Socket; answer: Promise<string> }> {
  const { port } = new URL(gw.url);
  const socket = connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  let answer = '';
  socket.on('data', (d: Buffer) => {
    answer += d.toString('latin1');
  });
  socket.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => socket.on('close', () => resolve(answer)));
  socket.write(
    `POST /rollout/generate HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nauthorization: Bearer ${SERVING}\r\n` +
      `content-type: application/json\r\ncontent-length: ${declared}\r\n\r\n`,
  );
  const chunk = Buffer.alloc(256 * 1024, 0x20);
  for (let n = 0; n < sent && !socket.destroyed; n += chunk.length) {
    if (!socket.write(chunk.subarray(0, Math.min(chunk.length, sent - n))))
      await new Promise((r) => {
        socket.once('drain', r);
        socket.once('close', r);
      });
  }
  return { socket, answer: closed };
}

describe('chaos: stalled bodies', { timeout: 60_000 }, () => {
  it('20 stalled 50 MB uploads stay within the body budget (503 + Retry-After beyond) and are cut at the deadline', async () => {
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, gw.server.bodyBudget.used);
    }, 5);
    const t0 = Date.now();
    const uploads = await Promise.all(
      Array.from({ length: 20 }, () => stalledUpload(50 * 1024 * 1024, 4 * 1024 * 1024)),
    );
    const answers = await Promise.all(uploads.map((u) => u.answer));
    const ms = Date.now() - t0;
    clearInterval(sampler);
    const statuses = answers.map((a) => Number(/^HTTP\/1\.1 (\d{3})/.exec(a)?.[1] ?? 0));
    const refused = answers.filter((a) => a.startsWith('HTTP/1.1 503'));
    const cut = answers.filter((a) => a.startsWith('HTTP/1.1 408'));
    console.log(
      `chaos: 20 stalled uploads: peak held ${(peak / 2 ** 20).toFixed(1)} MiB of a ${BUDGET / 2 ** 20} MiB budget; ` +
        `${refused.length} refused 503, ${cut.length} cut 408 after ${ms} ms`,
    );
    expect(peak).toBeLessThanOrEqual(BUDGET);
    expect(refused.length).toBeGreaterThan(0);
    for (const a of refused) {
      expect(a).toMatch(/retry-after: 1/i);
      expect(a).toContain('"body_budget_exhausted"');
    }
    expect(cut.length).toBeGreaterThan(0);
    for (const a of cut) expect(a).toContain('"request_timeout"');
    expect(statuses.every((s) => s === 503 || s === 408)).toBe(true);
    // Cut at the deadline (checked every second), not held open.
    expect(ms).toBeLessThan(DEADLINE_MS + 5000);
    // Every cut or refused body gave its bytes back once its connection closed.
    await within(5000, () => gw.server.bodyBudget.used === 0, 'budget released');
  });

  it('an answer that takes longer than the body deadline is not cut (the deadline is for the request only)', async () => {
    const t0 = Date.now();
    const r = await call('/rollout/generate', {
      body: JSON.stringify({
        model: 'policy-code',
        text: 'x',
        stream: true,
        sampling_params: { max_new_tokens: 4000, ignore_eos: true },
      }),
    });
    expect(r.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThan(DEADLINE_MS);
  });
});
