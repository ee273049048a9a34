import { type ReplicaState, UisError } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { type ResolvedModel, resolveModel } from './resolve-model.ts';
import { modelEntry, snapshot } from './testing.ts';

function ok(result: ResolvedModel | UisError): ResolvedModel {
  if (result instanceof UisError) throw new Error(`expected a model, got ${result.code}: ${result.message}`);
  return result;
}

function err(result: ResolvedModel | UisError): UisError {
  if (!(result instanceof UisError)) throw new Error(`expected an error, got model ${result.name}`);
  return result;
}

describe('resolveModel', () => {
  const cases: Array<{
    name: string;
    request: { model?: string; routeKey?: string };
    model: string;
    via: ResolvedModel['via'];
  }> = [
    { name: 'explicit model id', request: { model: 'code-teacher' }, model: 'code-teacher', via: 'model' },
    { name: 'alias', request: { model: 'coder' }, model: 'code-teacher', via: 'alias' },
    { name: 'served model name', request: { model: 'Qwen3-8B' }, model: 'math-teacher', via: 'served_name' },
    { name: 'route_key', request: { routeKey: 'code' }, model: 'code-teacher', via: 'route_key' },
    {
      name: 'model beats route_key',
      request: { model: 'math-teacher', routeKey: 'code' },
      model: 'math-teacher',
      via: 'model',
    },
    {
      name: 'alias beats route_key',
      request: { model: 'teacher', routeKey: 'code' },
      model: 'math-teacher',
      via: 'alias',
    },
    { name: 'default model', request: {}, model: 'math-teacher', via: 'default' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const resolved = ok(resolveModel(snapshot(), c.request));
      expect(resolved.name).toBe(c.model);
      expect(resolved.via).toBe(c.via);
      expect(resolved.state).toBe('ready');
    });
  }

  it('reports the served name, the policy, the epoch and the revision', () => {
    const snap = snapshot({ topology_revision: 9 });
    snap.routing!.model_policies = { 'math-teacher': 'cache_aware' };
    const r = ok(resolveModel(snap, { model: 'teacher' }));
    expect(r).toMatchObject({
      servedName: 'Qwen3-8B',
      policy: 'cache_aware',
      registryEpoch: 'epoch-a',
      topologyRevision: 9,
    });
    expect(ok(resolveModel(snap, { model: 'coder' })).servedName).toBe('code-teacher');
    expect(ok(resolveModel(snap, { model: 'coder' })).policy).toBe('round_robin');
  });

  it('an unknown model is a 400 naming what was asked and what exists', () => {
    const e = err(resolveModel(snapshot(), { model: 'gpt-5' }));
    expect(e).toMatchObject({ code: 'model_not_served', status: 400, path: 'body.model' });
    expect(e.message).toContain('gpt-5');
    expect(e.message).toContain('math-teacher, code-teacher');
    expect(e.message).toContain('teacher, coder');
  });

  it('an unknown route_key is a 400 even when a default model exists', () => {
    const e = err(resolveModel(snapshot(), { routeKey: 'poetry' }));
    expect(e).toMatchObject({ code: 'unknown_route_key', status: 400, path: 'route_key' });
    expect(e.message).toContain('poetry');
    expect(e.message).toContain('math, code');
  });

  it('an unknown route_key is a 400 without a default model', () => {
    const snap = snapshot();
    snap.routing!.default_model = null;
    expect(err(resolveModel(snap, { routeKey: 'poetry' })).code).toBe('unknown_route_key');
  });

  it('nothing asked, no default, several models: 400 model_required', () => {
    const snap = snapshot();
    snap.routing!.default_model = null;
    const e = err(resolveModel(snap, {}));
    expect(e).toMatchObject({ code: 'model_required', status: 400 });
    expect(e.message).toContain('math-teacher, code-teacher');
  });

  it('nothing asked, no routing block, exactly one model: that model', () => {
    const snap = snapshot({ models: { only: modelEntry('only', 1) } });
    delete snap.routing;
    expect(ok(resolveModel(snap, {})).via).toBe('only_model');
  });

  it('explicit routing rules override the snapshot block (gateway passes its RoutingSpec)', () => {
    const r = ok(
      resolveModel(
        snapshot(),
        { routeKey: 'x' },
        { route_keys: { x: 'code-teacher' }, aliases: {}, policy: 'affinity' },
      ),
    );
    expect(r).toMatchObject({ name: 'code-teacher', policy: 'affinity' });
  });

  const notReady: ReplicaState[] = ['sleeping', 'draining', 'onloading', 'starting', 'dead'];
  for (const state of notReady) {
    it(`a ${state} model is a 503 with retry guidance`, () => {
      const snap = snapshot();
      snap.models['math-teacher'] = modelEntry('math-teacher', 2, {
        state,
        engines: [{ engine_id: 'math-teacher/0', base_url: 'http://a:1', state, direct_eligible: false }],
      });
      const e = err(resolveModel(snap, { model: 'math-teacher' }));
      expect(e).toMatchObject({ code: 'model_not_ready', status: 503 });
      expect(e.message).toContain(state);
      const details = e.details as { retry_after_s: number; reason: string; state: string };
      expect(details.state).toBe(state);
      expect(details.retry_after_s).toBeGreaterThan(0);
      expect(details.reason).toContain(state);
    });
  }

  it('a model an operator drained says so: no phase change brings it back, an operator must activate it', () => {
    const snap = snapshot();
    snap.models['math-teacher'] = modelEntry('math-teacher', 2, {
      state: 'sleeping',
      held: true,
      engines: [
        { engine_id: 'math-teacher/0', base_url: 'http://a:1', state: 'sleeping', direct_eligible: false },
      ],
    });
    const e = err(resolveModel(snap, { model: 'math-teacher' }));
    expect(e).toMatchObject({
      code: 'model_not_ready',
      status: 503,
      details: { held: true, state: 'sleeping' },
    });
    expect(e.message).toBe(
      'model "math-teacher" is sleeping: an operator drained it; it serves again once an operator activates it; retry after 30s',
    );
  });

  it('an alias to a model missing from discovery is a 503 routing_inconsistent, not a fallback', () => {
    const snap = snapshot();
    snap.routing!.aliases.ghost = 'gone';
    expect(err(resolveModel(snap, { model: 'ghost' }))).toMatchObject({
      code: 'routing_inconsistent',
      status: 503,
    });
  });

  const malformed: Array<[string, unknown]> = [
    ['null', null],
    ['a string', 'hello'],
    ['no models', { role: 'teacher', topology_revision: 1, phase: null }],
    [
      'a bad engine',
      {
        role: 'teacher',
        topology_revision: 1,
        phase: null,
        models: { m: { state: 'ready', router_url: null, engines: [{ engine_id: 'x' }] } },
      },
    ],
    ['a negative revision', { ...snapshot(), topology_revision: -1 }],
  ];
  for (const [name, input] of malformed) {
    it(`a malformed snapshot (${name}) is a 503, never a throw`, () => {
      const e = err(resolveModel(input, { model: 'm' }));
      expect(e).toMatchObject({ code: 'discovery_malformed', status: 503 });
    });
  }
});
