import { MemoryLogger } from '@uis/manager';
import { deferConfig } from '@uis/manager/testing';
import { parseConfig } from '@uis/spec';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ControlPlane } from '../control-plane.ts';
import { createControlPlane } from '../create-control-plane.ts';
import { InProcessSimLauncher } from '../launchers/in-process-sim-launcher.ts';
import { batchCommands } from './batches.ts';
import { eventCommands } from './events.ts';
import { commandNamed, commandRoutes, permissionRefusal } from './index.ts';
import { phaseCommands } from './phases.ts';
import { replicaCommands } from './replicas.ts';
import { requestCommands } from './requests.ts';
import { roleCommands } from './roles.ts';
import { type CommandCall, runCommand } from './run-command.ts';
import { scaleCommands } from './scale.ts';
import { COMMAND_TABLE, COMMANDS } from './table.ts';
import { weightCommands } from './weights.ts';

/** JSON Schema nodes that say nothing about their value (an `unknown` or `any` on the wire). */
function untyped(node: unknown, at: string, out: string[]): string[] {
  if (Array.isArray(node)) for (const [i, n] of node.entries()) untyped(n, `${at}[${i}]`, out);
  else if (node !== null && typeof node === 'object') {
    const o = node as Record<string, unknown>;
    const says = ['type', 'anyOf', 'oneOf', 'allOf', '$ref', 'const', 'enum', 'not'].some((k) => k in o);
    if (!says && !at.endsWith('properties') && !at.endsWith('$defs')) out.push(at || '(root)');
    for (const [k, v] of Object.entries(o)) if (typeof v === 'object') untyped(v, `${at}.${k}`, out);
  }
  return out;
}

describe('the command table', () => {
  it('declares each command once, with a unique route whose :params are its params schema', () => {
    const names = COMMANDS.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    for (const [key, c] of Object.entries(COMMAND_TABLE)) expect(c.name).toBe(key);
    // Every group's commands are in the table: no group's entry shadows another's of the same name.
    const groups = [
      roleCommands,
      weightCommands,
      requestCommands,
      replicaCommands,
      scaleCommands,
      phaseCommands,
      batchCommands,
      eventCommands,
    ];
    expect(groups.flatMap((g) => Object.keys(g)).sort()).toEqual([...names].sort());
    const routes = commandRoutes();
    expect(new Set(routes.map((r) => `${r.method} ${r.path}`)).size).toBe(routes.length);
    for (const r of routes) {
      expect(Object.keys(r.command.params.shape).sort()).toEqual([...r.params].sort());
      expect(r.name).toMatch(/^[a-z]+(_[a-z]+)*$/);
      // A read changes nothing: no operation id, no audit record.
      if (r.method === 'GET') expect([r.idempotent, r.audited]).toEqual([false, false]);
      // A wait names the input field of its time, with a default: clients give the call that long.
      if (r.waitsUpTo !== null)
        expect(r.command.input.shape[r.waitsUpTo].parse(undefined), r.name).toBeGreaterThan(0);
    }
    expect(commandNamed('drain_model')?.path).toBe('/roles/:role/models/:model/drain');
    expect(commandNamed('nope')).toBeUndefined();
  });

  it('gives each command the permission an RL operator expects: reads and waits the serving token, mutations the admin token', () => {
    const serving = [
      'list_intents',
      'list_replicas',
      'get_replica',
      'list_roles',
      'list_phases',
      'wait_barrier',
      'list_batches',
      'get_batch',
      'list_events',
      'weight_switches',
      'list_scale_ops',
      'get_scale_op',
    ];
    for (const c of COMMANDS)
      expect([c.name, c.permission]).toEqual([c.name, serving.includes(c.name) ? 'serving' : 'admin']);
    // The rule holds by construction: what the serving token may call changes nothing (no audit, no operation id).
    for (const c of COMMANDS.filter((x) => x.permission !== 'admin'))
      expect([c.name, c.idempotency, c.audit]).toEqual([c.name, 'none', null]);
  });

  it('one rule decides every door: 401 without a valid token, 403 for the serving token on an admin command', () => {
    const table = (['admin', 'serving', 'public'] as const).flatMap((permission) =>
      (['admin', 'serving', 'anonymous'] as const).flatMap((caller) =>
        [true, false].map(
          (servingSet) =>
            `${permission} ${caller} ${servingSet}: ${permissionRefusal(permission, caller, servingSet)}`,
        ),
      ),
    );
    expect(table).toEqual([
      'admin admin true: null',
      'admin admin false: null',
      'admin serving true: forbidden',
      'admin serving false: forbidden',
      'admin anonymous true: unauthorized',
      'admin anonymous false: unauthorized',
      'serving admin true: null',
      'serving admin false: null',
      'serving serving true: null',
      'serving serving false: null',
      'serving anonymous true: unauthorized',
      'serving anonymous false: null',
      'public admin true: null',
      'public admin false: null',
      'public serving true: null',
      'public serving false: null',
      'public anonymous true: null',
      'public anonymous false: null',
    ]);
  });

  it('types everything on the wire: no schema node of any command is an untyped unknown', () => {
    const found: string[] = [];
    for (const c of COMMANDS)
      for (const [part, schema] of [
        ['params', c.params],
        ['input', c.input],
        ['output', c.output],
      ] as const) {
        const json = z.toJSONSchema(schema as z.ZodType, { io: part === 'output' ? 'output' : 'input' });
        untyped(json, `${c.name}.${part}`, found);
      }
    expect(found).toEqual([]);
    // The check itself sees an unknown.
    expect(untyped(z.toJSONSchema(z.object({ x: z.unknown() })), 'probe', [])).toEqual([
      'probe.properties.x',
    ]);
  });
});

describe('running commands', { timeout: 60_000 }, () => {
  const launcher = new InProcessSimLauncher({ simOnloadMs: 5, simOffloadMs: 5 });
  let plane: ControlPlane;
  const logger = new MemoryLogger();
  beforeAll(async () => {
    plane = await createControlPlane({ config: parseConfig(deferConfig()), launcher, logger });
  });
  afterAll(async () => {
    await plane?.stop();
    await launcher.closeAll();
  });
  const call = (name: string, over: Partial<CommandCall>) => {
    const cmd = commandNamed(name);
    if (!cmd) throw new Error(`no command ${name}`);
    return runCommand(plane, cmd, {
      params: {},
      input: {},
      actor: 'test',
      operationId: null,
      inputRoot: 'body',
      paramsRoot: '',
      fallbackSubject: name,
      ...over,
    });
  };

  it('answers the envelope, runs a keyed command once per operation id and audits it the same way', async () => {
    const params = { role: 'rollout', model: 'policy' };
    const first = await call('drain_model', { params, operationId: 'op-1' });
    expect(first).toMatchObject({ ok: true, operation_id: 'op-1', result: { memory_released: true } });
    const again = await call('drain_model', { params, operationId: 'op-1' });
    expect(again).toEqual(first);
    await expect(call('activate_model', { params, operationId: 'op-1' })).rejects.toMatchObject({
      code: 'operation_id_conflict',
    });
    const audit = plane.events.list({ kind: 'admin.drain_model', limit: 10 });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: 'test', subject: 'rollout/policy', operation_id: 'op-1' });
    expect(audit[0]?.data).toEqual({ ok: true, request: { role: 'rollout', model: 'policy' } });
    const on = await call('activate_model', { params });
    expect(on).toEqual({ ok: true, operation_id: null, result: { onloaded: true } });
  });

  it('refuses bad input at the path the caller wrote it, and audits the refusal', async () => {
    await expect(
      call('drain', { params: { role: 'rollout' }, input: { policy: 'later' } }),
    ).rejects.toMatchObject({
      code: 'invalid_input',
      path: 'body.policy',
    });
    await expect(call('drain', { params: { role: 'critic' } })).rejects.toMatchObject({
      code: 'unknown_role',
      path: 'role',
    });
    const refused = plane.events.list({ kind: 'admin.drain', limit: 10 }).map((e) => e.data);
    expect(refused).toEqual([
      {
        ok: false,
        request: { role: 'rollout', policy: 'later' },
        error: expect.objectContaining({ code: 'invalid_input' }),
      },
      { ok: false, request: { role: 'critic' }, error: expect.objectContaining({ code: 'unknown_role' }) },
    ]);
  });

  it('abort_request: a held rid at its replica, abort_all at every running replica, bad input at its path', async () => {
    const params = { role: 'rollout' };
    const manager = plane.managerOf('rollout');
    const counted: unknown[] = [];
    const off = manager.requests.onAborted((...a) => counted.push(a));
    manager.requests.hold('r-1', { model: 'policy', engineId: 'policy/1', requestId: 'req-1' });
    const one = await call('abort_request', { params, input: { rid: 'r-1' }, operationId: 'abort-1' });
    expect(one.result).toEqual({
      aborted: [{ rid: 'r-1', model: 'policy', engine_id: 'policy/1' }],
      engines: ['policy/1'],
    });
    const all = await call('abort_request', { params, input: { abort_all: true, model: 'policy' } });
    const running = manager.eligibleEngines('policy').map((e) => e.engineId);
    expect(all.result).toEqual({
      aborted: [{ rid: 'r-1', model: 'policy', engine_id: 'policy/1' }],
      engines: [...running].sort(),
    });
    manager.requests.release('r-1', 'req-1');
    off();
    expect(counted).toEqual([
      ['policy', 'abort_request', 1],
      ['policy', 'abort_all', 1],
    ]);
    await expect(call('abort_request', { params, input: { rid: 'r-1' } })).rejects.toMatchObject({
      code: 'unknown_rid',
      path: 'rid',
      status: 404,
    });
    await expect(
      call('abort_request', { params, input: { abort_all: true, model: 'nope' } }),
    ).rejects.toMatchObject({ code: 'unknown_model', path: 'model' });
    for (const [input, path] of [
      [{}, 'body.abort_all'],
      [{ rid: 'x', abort_all: true }, 'body.rid'],
      [{ rid: 'x', model: 'policy' }, 'body.model'],
      [{ rid: '' }, 'body.rid'],
      [{ abort_all: true, extra: 1 }, 'body'],
    ] as const)
      await expect(call('abort_request', { params, input }), JSON.stringify(input)).rejects.toMatchObject({
        code: 'invalid_input',
        path,
      });
    expect(plane.events.list({ kind: 'admin.abort_request', limit: 20 })).toHaveLength(9);
  });

  it('logs every audited command at info, a weight update and a refusal included', async () => {
    const from = logger.lines.length;
    await call('update_weights', {
      params: { role: 'rollout', model: 'policy' },
      input: { source: 'version', weight_version: '7' },
    });
    await expect(call('drain', { params: { role: 'critic' } })).rejects.toMatchObject({
      code: 'unknown_role',
    });
    const lines = logger.lines
      .slice(from)
      .filter((l) => l.msg === 'update_weights done' || l.msg === 'drain refused');
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      ['info', 'update_weights done'],
      ['info', 'drain refused'],
    ]);
    expect(lines[0]?.obj).toMatchObject({
      command: 'update_weights',
      subject: 'rollout/policy',
      actor: 'test',
    });
    expect(lines[1]?.obj).toMatchObject({
      command: 'drain',
      code: 'unknown_role',
      request: { role: 'critic' },
    });
  });

  it("keeps a count of a batch's samples in its audit record and log line, and a refused request bounded", async () => {
    const from = logger.lines.length;
    const samples = Array.from({ length: 40 }, (_, i) => ({
      sample_id: `s${i}`,
      input: { messages: [{ role: 'user', content: `answer ${i} `.repeat(200) }] },
    }));
    await call('submit_batch', { input: { kind: 'genrm_score', samples } });
    // Refused: a drain policy the schema does not know, sent with a long array and a long string.
    await expect(
      call('drain', {
        params: { role: 'rollout' },
        input: { policy: 'x'.repeat(2000), models: Array.from({ length: 100 }, (_, i) => `m${i}`) },
      }),
    ).rejects.toMatchObject({ code: 'invalid_input' });
    const submitted = plane.events.list({ kind: 'admin.submit_batch', limit: 100 }).at(-1);
    expect(submitted?.data).toEqual({ ok: true, request: { kind: 'genrm_score', model: null, samples: 40 } });
    const done = logger.lines.slice(from).find((l) => l.msg === 'submit_batch done');
    expect(done?.obj).toMatchObject({ request: { kind: 'genrm_score', model: null, samples: 40 } });
    const refused = plane.events.list({ kind: 'admin.drain', limit: 100 }).at(-1);
    const { request } = (refused?.data ?? {}) as { request: { policy: string; models: string[] } };
    expect(request.policy).toBe(`${'x'.repeat(500)}... (1500 more characters)`);
    expect(request.models).toHaveLength(17);
    expect(request.models.at(-1)).toBe('... (84 more items)');
    expect(JSON.stringify(refused?.data).length).toBeLessThan(1500);
  });

  it('reads through the same envelope, snake_case, unaudited: phases, a barrier wait, batches, events', async () => {
    const phases = await call('list_phases', { inputRoot: 'query' });
    const leases = (phases.result as { leases: Array<Record<string, unknown>> }).leases;
    expect(leases.map((l) => l.group)).toEqual(['actor']);
    // The proof of the last release, in snake_case like every key we define.
    expect(leases[0]?.last_release).toMatchObject({ engines: expect.any(Array) });
    expect(Object.keys(leases[0] ?? {})).not.toContain('lastRelease');
    const wait = await call('wait_barrier', { input: { phase: 'rollout', timeout_s: 1 } });
    expect(wait).toMatchObject({
      ok: true,
      operation_id: null,
      result: { phase: 'rollout', status: 'held' },
    });
    const batches = await call('list_batches', { input: { state: 'committed' }, inputRoot: 'query' });
    expect(batches.result).toEqual({ batches: [] });
    const events = await call('list_events', { input: { kind: 'admin.drain_model' }, inputRoot: 'query' });
    expect((events.result as { events: unknown[] }).events).toHaveLength(1);
    expect(plane.events.list({ kind: 'admin.list_phases', limit: 1 })).toEqual([]);
  });

  it('reads one replica by engine id (get_replica), and names an unknown one at engine_id', async () => {
    const one = await call('get_replica', {
      params: { role: 'rollout', engine_id: 'policy/1' },
      inputRoot: 'query',
    });
    expect(one.result).toMatchObject({
      role: 'rollout',
      model: 'policy',
      engine_id: 'policy/1',
      state: 'ready',
    });
    expect((one.result as { url: string }).url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await expect(
      call('get_replica', { params: { role: 'rollout', engine_id: 'policy/9' }, inputRoot: 'query' }),
    ).rejects.toMatchObject({ code: 'unknown_engine', path: 'engine_id' });
  });
});
