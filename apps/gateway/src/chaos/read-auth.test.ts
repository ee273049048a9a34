import { request } from 'node:http';
import { Writable } from 'node:stream';
import { ManualClock } from '@uis/sglang-engine/testing';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AuthFailureLimiter } from '../server/request-guard.ts';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// Chaos: reads around the serving token, a DNS-rebinding page, a token guesser. Loopback only.
const ADMIN = 'admin-secret-token';
const SERVING = 'serving-secret-token';
const clock = new ManualClock();
/** The server's log lines (JSON), to see the lockouts it reports. */
const logged: Array<{ msg: string; client?: string; path?: string }> = [];
const logger = pino(
  { level: 'warn' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') logged.push(JSON.parse(line));
      done();
    },
  }),
);
const gw = gatewayOnSims({
  config: singleRolloutConfig(),
  server: {
    adminToken: ADMIN,
    servingToken: SERVING,
    healthProbeMs: 0,
    allowedHosts: ['uis.example.org'],
    authFailures: new AuthFailureLimiter(clock),
    logger,
  },
});

/** A raw GET with exactly these headers (fetch would set Host itself). */
function get(
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string; retryAfter?: string }> {
  const { port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
      });
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body,
          ...(res.headers['retry-after'] === undefined
            ? {}
            : { retryAfter: String(res.headers['retry-after']) }),
        }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

const input = encodeURIComponent(JSON.stringify({}));

describe('chaos: reads follow the serving token', { timeout: 60_000 }, () => {
  it('the console API (queries and the live subscription) is refused without the token and served with it', async () => {
    const host = { host: new URL(gw.url).host };
    for (const path of [`/trpc/state?input=${input}`, `/trpc/changes?input=${input}`]) {
      const refused = await get(path, host);
      expect(refused.status, path).toBe(401);
      expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'unauthorized' } });
      expect(refused.body).not.toContain('policy/0');
    }
    const wrong = await get(`/trpc/state?input=${input}`, {
      ...host,
      authorization: 'Bearer nope-nope-nope',
    });
    expect(wrong.status).toBe(401);
    for (const token of [SERVING, ADMIN]) {
      const ok = await get(`/trpc/state?input=${input}`, { ...host, authorization: `Bearer ${token}` });
      expect(ok.status).toBe(200);
      expect(ok.body).toContain('policy/0');
    }
    // The subscription (SSE: no header possible) passes the token as tRPC connection params.
    const params = encodeURIComponent(JSON.stringify({ token: SERVING }));
    const stream = await new Promise<number>((resolve, reject) => {
      const { port } = new URL(gw.url);
      const req = request(
        {
          host: '127.0.0.1',
          port,
          path: `/trpc/changes?input=${input}&connectionParams=${params}`,
          agent: false,
        },
        (res) => {
          resolve(res.statusCode ?? 0);
          res.destroy();
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(stream).toBe(200);
  });

  it('a Host that does not name this server is refused 403 (DNS rebinding); IP literals and configured names pass', async () => {
    const { port } = new URL(gw.url);
    const auth = { authorization: `Bearer ${SERVING}` };
    const rebound = await get('/rollout/engines', { ...auth, host: `attacker.example.com:${port}` });
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body)).toMatchObject({
      error: { code: 'host_not_allowed', path: 'headers.host' },
    });
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'uis.example.org', `[::1]:${port}`]) {
      expect((await get('/rollout/engines', { ...auth, host })).status, host).toBe(200);
    }
  });

  it('failed authentications are rate-limited per client: 429 + Retry-After, lifted when the window ends; a valid token always passes', async () => {
    const host = { host: new URL(gw.url).host };
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await get('/rollout/engines', { ...host, authorization: `Bearer guess-${i}-xxxxxxxx` });
      statuses.push(r.status);
    }
    const firstRefusal = statuses.indexOf(429);
    expect(firstRefusal).toBeGreaterThan(0);
    expect(statuses.slice(0, firstRefusal).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(firstRefusal).every((s) => s === 429)).toBe(true);
    const limited = await get('/rollout/engines', { ...host, authorization: 'Bearer another-guess-xxxx' });
    expect(limited.status).toBe(429);
    expect(Number(limited.retryAfter)).toBeGreaterThan(0);
    expect(JSON.parse(limited.body)).toMatchObject({ error: { code: 'auth_rate_limited' } });
    // The same address with the right token is served at once, and so are the console API and the admin API.
    expect((await get('/rollout/engines', { ...host, authorization: `Bearer ${SERVING}` })).status).toBe(200);
    expect(
      (await get(`/trpc/state?input=${input}`, { ...host, authorization: `Bearer ${ADMIN}` })).status,
    ).toBe(200);
    expect((await get('/admin/roles', { ...host, authorization: `Bearer ${ADMIN}` })).status).toBe(200);
    // No token at all is no valid token: refused too while the lockout lasts.
    expect((await get('/rollout/engines', host)).status).toBe(429);
    expect(logged.filter((l) => l.msg.startsWith('client locked out'))).toHaveLength(1);
    expect(logged.find((l) => l.msg.startsWith('client locked out'))).toMatchObject({
      client: '127.0.0.1',
      path: '/rollout/engines',
    });
    await clock.advance(10_000);
    expect((await get('/rollout/engines', { ...host, authorization: 'Bearer x-wrong-again' })).status).toBe(
      401,
    );
  });

  it("the console's sign-in (checkToken) tells the serving token from the admin token; wrong guesses are counted", async () => {
    await clock.advance(10_000); // a fresh window of the auth-failure limiter
    const check = async (token: string) => {
      const r = await fetch(`${gw.url}/trpc/checkToken`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
      });
      return { status: r.status, body: await r.text() };
    };
    for (const [token, permission] of [
      [ADMIN, 'admin'],
      [SERVING, 'serving'],
    ] as const) {
      const r = await check(token);
      expect(r.status, permission).toBe(200);
      expect(JSON.parse(r.body)).toEqual({ result: { data: { ok: true, permission } } });
    }
    const wrong = await check('not-a-token-at-all');
    expect(wrong.status).toBe(401);
    expect(wrong.body).not.toContain(SERVING);
    expect(wrong.body).not.toContain(ADMIN);
    // A guesser at the sign-in is limited like any other: the window fills, then wrong tokens get 429 while the
    // right ones (checked first, in the body) still sign in.
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) statuses.push((await check(`guess-${i}-xxxxxxxx`)).status);
    expect(statuses.slice(0, 9).every((s) => s === 401)).toBe(true);
    expect(statuses.at(-1)).toBe(429);
    expect((await check(SERVING)).status).toBe(200);
    expect((await check(ADMIN)).status).toBe(200);
    const locked = await check('guess-again-xxxx');
    expect(locked.status).toBe(429);
    expect(JSON.parse(locked.body)).toMatchObject({
      error: { data: { error: { code: 'auth_rate_limited' } } },
    });
    await clock.advance(10_000);
    expect((await check('guess-after-xxxx')).status).toBe(401);
  });

  it("an attacker at 100 bad guesses/s on the operator's address never refuses the operator's correct calls", async () => {
    await clock.advance(10_000);
    const host = { host: new URL(gw.url).host };
    const attacker: number[] = [];
    const operator: number[] = [];
    // 30 s of the injected clock: a wrong guess every 10 ms, an operator call (serving read, admin read, console
    // read in turn) every 100 ms, all from 127.0.0.1.
    for (let tick = 0; tick < 3000; tick++) {
      await clock.advance(10);
      attacker.push(
        (await get('/rollout/engines', { ...host, authorization: `Bearer g${tick}-xxxxxxxx` })).status,
      );
      if (tick % 10 !== 0) continue;
      const calls = [
        ['/rollout/engines', SERVING],
        ['/admin/roles', ADMIN],
        [`/trpc/state?input=${input}`, SERVING],
      ] as const;
      const [path, token] = calls[(tick / 10) % calls.length] as (typeof calls)[number];
      operator.push((await get(path, { ...host, authorization: `Bearer ${token}` })).status);
    }
    expect(operator).toHaveLength(300);
    expect(operator.every((s) => s === 200)).toBe(true);
    // 10 guesses per 10 s window reach the token check (401); the other 990 are refused (429).
    expect(attacker.filter((s) => s === 401).length).toBeLessThanOrEqual(40);
    expect(attacker.filter((s) => s === 429).length).toBeGreaterThanOrEqual(2960);
    expect(attacker.every((s) => s === 401 || s === 429)).toBe(true);
  });
});
