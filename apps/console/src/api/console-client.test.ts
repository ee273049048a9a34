// @vitest-environment node

import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
import { ConsoleStateSchema } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { type MockGateway, startMockGateway } from '../../testing/mock-gateway-server.ts';
import type { ConsoleApiRouter } from '../../testing/mock-router.ts';
import type { AppRouter } from './app-router.ts';
import { createConsoleClient, describeError } from './trpc.ts';

// The console's tRPC client over real HTTP against the contract served by the mock gateway: what it sends (the
// bearer token) and how it turns refusals into operator messages.
let gateway: MockGateway;
let token: string | null = null;
let client: ReturnType<typeof createConsoleClient>;

beforeAll(async () => {
  gateway = await startMockGateway({ adminToken: 'right-token' });
  client = createConsoleClient(`${gateway.url}/trpc`, () => token);
});
afterAll(async () => {
  await gateway.close();
});

async function refusal(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (e) {
    return describeError(e);
  }
  throw new Error('expected the call to be refused');
}

describe('console client', () => {
  it("is part of the control plane's contract: the console's procedures, inputs and outputs (checked by tsc)", () => {
    type Used = keyof inferRouterInputs<ConsoleApiRouter>;
    expectTypeOf<Used>().toExtend<keyof inferRouterInputs<AppRouter>>();
    expectTypeOf<Pick<inferRouterOutputs<AppRouter>, Used>>().toEqualTypeOf<
      inferRouterOutputs<ConsoleApiRouter>
    >();
    expectTypeOf<inferRouterInputs<ConsoleApiRouter>['resolveLease']>().toExtend<
      inferRouterInputs<AppRouter>['resolveLease']
    >();
    expectTypeOf<inferRouterInputs<ConsoleApiRouter>['restartReplica']>().toExtend<
      inferRouterInputs<AppRouter>['restartReplica']
    >();
  });

  it('reads a state that satisfies the console schema', async () => {
    const state = await client.state.query();
    expect(ConsoleStateSchema.safeParse(state).success).toBe(true);
    expect(state.cluster.nodes.map((n) => n.gpus)).toEqual([8, 8]);
  });

  it('refuses a wrong token with an operator message', async () => {
    const r = await refusal(client.checkToken.mutate({ token: 'wrong' }));
    expect(r.unauthorized).toBe(true);
    expect(r.message).toBe('Refused: token refused');
    await expect(client.checkToken.mutate({ token: 'right-token' })).resolves.toEqual({
      ok: true,
      permission: 'admin',
    });
  });

  it('sends the admin token as a bearer header on actions, and nothing changes without it', async () => {
    token = null;
    const r = await refusal(client.drainModel.mutate({ role: 'rollout', model: 'policy' }));
    expect(r.unauthorized).toBe(true);
    // No tick: the mock stays in the rollout phase, so the policy replicas serve until a drain goes through.
    const before = (await client.state.query()).replicas.filter((x) => x.model === 'policy');
    expect(before.map((x) => x.state)).toEqual(['ready', 'ready', 'ready', 'ready']);
    token = 'right-token';
    const ok = await client.drainModel.mutate({ role: 'rollout', model: 'policy' });
    expect(ok.ok).toBe(true);
    const state = await client.state.query();
    const policy = state.replicas.filter((x) => x.model === 'policy');
    expect(policy.every((x) => x.state === 'sleeping' && !x.direct_eligible)).toBe(true);
    expect(state.events.at(-1)?.kind).toBe('admin.drain');
  });

  it('resolves a blocked lease (the contract the gateway implements), and only a blocked one', async () => {
    token = 'right-token';
    const idle = await refusal(client.resolveLease.mutate({ group: 'actor', phase: 'rollout' }));
    expect(idle).toEqual({ unauthorized: false, message: 'lease of actor is not blocked' });
    gateway.api.block('transition rollout -> score timed out');
    const unknown = await refusal(client.resolveLease.mutate({ group: 'actor', phase: 'nope' }));
    expect(unknown.message).toContain('unknown phase "nope"');
    const ok = await client.resolveLease.mutate({ group: 'actor', phase: 'score', note: 'checked' });
    expect(ok).toMatchObject({
      ok: true,
      operation_id: null,
      result: { group: 'actor', phase: 'score', status: 'held' },
    });
    const group = (await client.state.query()).activation_groups[0];
    expect(group).toMatchObject({ current_phase: 'score', blocked: null });
  });

  it('passes an action refusal through as a message that is not an auth problem', async () => {
    token = 'right-token';
    const r = await refusal(client.drainModel.mutate({ role: 'rollout', model: 'nope' }));
    expect(r.unauthorized).toBe(false);
    expect(r.message).toBe('unknown model rollout/nope');
  });
});
