import { type CommandRoute, commandRoutes, type Permission } from '@uis/control-plane';
import { isUisError, systemClock } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { callAdmin, tokenFor } from '../cli/admin-command.ts';
import { AuthFailureLimiter } from '../server/request-guard.ts';
import { gatewayOnSims, singleRolloutConfig } from '../testing/fixtures.ts';

// Every command through every door (admin REST, tRPC, the CLI) with no token, the serving token and the admin
// token: each door refuses or lets through exactly what the command table's permission says. The calls cannot
// change anything: path parameters name nothing (`nope`) and POST bodies carry an unknown field (400 once let in).
const ADMIN = 'perm-admin-token';
const SERVING = 'perm-serving-token';
// This test sends hundreds of refused tokens on purpose: a limiter that never trips.
const server = { adminToken: ADMIN, healthProbeMs: 0 } as const;
const limiter = () => new AuthFailureLimiter(systemClock, Number.MAX_SAFE_INTEGER);
const withServing = gatewayOnSims({
  config: singleRolloutConfig(),
  server: { ...server, servingToken: SERVING, authFailures: limiter() },
});
const adminOnly = gatewayOnSims({
  config: singleRolloutConfig(),
  server: { ...server, authFailures: limiter() },
});

type Outcome = 'unauthorized' | 'forbidden' | 'let in';
type Door = (url: string, route: CommandRoute, token: string | undefined) => Promise<Outcome>;

const params = (route: CommandRoute) => Object.fromEntries(route.params.map((p) => [p, 'nope']));
const bearer = (token: string | undefined): Record<string, string> =>
  token === undefined ? {} : { authorization: `Bearer ${token}` };
const byStatus = (status: number): Outcome =>
  status === 401 ? 'unauthorized' : status === 403 ? 'forbidden' : 'let in';

const rest: Door = async (url, route, token) => {
  let path = route.path;
  for (const p of route.params) path = path.replace(`{${p}}`, 'nope');
  const res = await fetch(`${url}${path}`, {
    method: route.method,
    headers: { ...bearer(token), 'content-type': 'application/json' },
    ...(route.method === 'POST' ? { body: JSON.stringify({ bogus: true }) } : {}),
  });
  await res.arrayBuffer();
  return byStatus(res.status);
};

const camel = (s: string) => s.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
const trpc: Door = async (url, route, token) => {
  const objectInput = 'shape' in route.command.input;
  const input = { ...params(route), ...(objectInput ? { bogus: true } : { input: { bogus: true } }) };
  const res =
    route.method === 'GET'
      ? await fetch(
          `${url}/trpc/${camel(route.name)}?input=${encodeURIComponent(JSON.stringify(params(route)))}`,
          {
            headers: bearer(token),
          },
        )
      : await fetch(`${url}/trpc/${camel(route.name)}`, {
          method: 'POST',
          headers: { ...bearer(token), 'content-type': 'application/json' },
          body: JSON.stringify(input),
        });
  await res.arrayBuffer();
  return byStatus(res.status);
};

const cli: Door = async (url, route, token) => {
  try {
    await callAdmin(route.name, {
      url,
      token,
      args: route.params.map((p) => `${p}=nope`),
      ...(route.method === 'POST' ? { input: '{"bogus": true}' } : {}),
    });
    return 'let in';
  } catch (e) {
    if (isUisError(e) && (e.code === 'unauthorized' || e.code === 'forbidden')) return e.code;
    return 'let in';
  }
};

const DOORS: Record<string, Door> = { rest, trpc, cli };

/** What each door must answer for `permission` with `caller` (a serving token configured or not). */
function expected(
  permission: Permission,
  caller: 'none' | 'serving' | 'admin',
  servingSet: boolean,
): Outcome {
  if (permission === 'public' || caller === 'admin') return 'let in';
  if (permission === 'serving') return caller === 'serving' || !servingSet ? 'let in' : 'unauthorized';
  // A serving token where none is configured is just a wrong token.
  return caller === 'serving' && servingSet ? 'forbidden' : 'unauthorized';
}

async function sweep(url: string, servingSet: boolean): Promise<string[]> {
  const wrong: string[] = [];
  const tokens = { none: undefined, serving: SERVING, admin: ADMIN } as const;
  for (const route of commandRoutes())
    for (const [door, call] of Object.entries(DOORS))
      for (const [caller, token] of Object.entries(tokens) as Array<['none' | 'serving' | 'admin', string]>) {
        const want = expected(route.permission, caller, servingSet);
        const got = await call(url, route, token);
        if (got !== want)
          wrong.push(`${door} ${route.name} (${route.permission}) ${caller}: ${got}, want ${want}`);
      }
  return wrong;
}

describe("every door enforces the command table's permission", { timeout: 120_000 }, () => {
  it('with a serving token configured: none -> 401; serving -> reads only (403 on mutations); admin -> all', async () => {
    expect(await sweep(withServing.url, true)).toEqual([]);
  });

  it('without one: reads are open like discovery, mutations still need the admin token', async () => {
    expect(await sweep(adminOnly.url, false)).toEqual([]);
  });

  it('a refused caller learns nothing about the route: an unknown admin path is 401 without a token', async () => {
    const res = await fetch(`${withServing.url}/admin/nothing-here`);
    expect(res.status).toBe(401);
    const known = await fetch(`${withServing.url}/admin/nothing-here`, { headers: bearer(SERVING) });
    expect(known.status).toBe(404);
  });

  it('the CLI shows each command the least token its permission takes', () => {
    const env = { UIS_ADMIN_TOKEN: 'a', UIS_SERVING_TOKEN: 's' };
    expect(tokenFor('admin', undefined, env)).toBe('a');
    expect(tokenFor('serving', undefined, env)).toBe('s');
    expect(tokenFor('serving', undefined, { UIS_ADMIN_TOKEN: 'a' })).toBe('a');
    expect(tokenFor('public', undefined, env)).toBeUndefined();
    expect(tokenFor('admin', 'given', env)).toBe('given');
  });
});
