import { writeFileSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { join } from 'node:path';
import { waitFor } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import {
  chaosScratch,
  listening,
  spawnUis,
  taggedPids,
  type UisProcess,
  within,
} from '../testing/uis-process.ts';

// Chaos: the operator's last word (a drain, a hold, an activation) outlives a kill -9 of uis.
const { dir: tmp, tags } = chaosScratch('intent');

const config = join(tmp, 'two-roles.yaml');
const db = join(tmp, 'uis.db');
const model = (name: string) =>
  `      - { name: ${name}, model_path: /models/${name}, weight_source: static, engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }] }`;
writeFileSync(
  config,
  [
    'cluster: { nodes: [{ name: node-0, gpus: 3 }] }',
    'gateway: { admin_token: chaos-token, launcher: sim }',
    'roles:',
    '  rollout:',
    '    deployment: { mode: decoupled }',
    '    models:',
    model('policy'),
    model('draft'),
    '  genrm:',
    '    deployment: { mode: decoupled }',
    '    models:',
    model('judge'),
  ].join('\n'),
);

const auth = { authorization: 'Bearer chaos-token' };

async function admin(url: string, path: string, body?: object): Promise<unknown> {
  const res = await fetch(`${url}/admin${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = (await res.json()) as { result?: unknown };
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer.result;
}

type Roles = {
  roles: Record<string, { models: Record<string, { held: boolean; replicas: Array<{ state: string }> }> }>;
};

/** `uis` again with the same arguments (same config and --db), once it listens. */
async function restart(args: string[]): Promise<{ uis: UisProcess; url: string }> {
  const uis = spawnUis(args);
  tags.push(uis.tag);
  return { uis, url: await listening(uis) };
}

/** Every model as `role/model` -> its replicas' states, plus `held` when an operator's drain holds it. */
async function models(url: string): Promise<Record<string, string>> {
  const { roles } = (await admin(url, '/roles')) as Roles;
  return Object.fromEntries(
    Object.entries(roles).flatMap(([role, r]) =>
      Object.entries(r.models).map(([name, m]) => [
        `${role}/${name}`,
        [...m.replicas.map((x) => x.state), ...(m.held ? ['held'] : [])].join(','),
      ]),
    ),
  );
}

describe('chaos: kill -9 of uis after operator commands', { timeout: 180_000 }, () => {
  it('a drain, a hold and an activation accepted before the crash are in force after the restart on the same --db', async () => {
    const args = ['serve', '--config', config, '--port', '0', '--db', db];
    const first = spawnUis(args);
    tags.push(first.tag);
    const url1 = await listening(first);
    await admin(url1, '/roles/genrm/models/judge/drain', {});
    await admin(url1, '/roles/rollout/drain', {});
    await admin(url1, '/roles/rollout/models/draft/activate', {});
    expect(await models(url1)).toEqual({
      'rollout/policy': 'sleeping',
      'rollout/draft': 'ready',
      'genrm/judge': 'sleeping,held',
    });

    process.kill(first.child.pid as number, 'SIGKILL');
    await first.exited;
    await within(10_000, () => taggedPids(first.tag).length === 0, 'engines of the killed uis gone');

    const { uis: second, url: url2 } = await restart(args);
    // The first answer after the restart already shows the operator's word: it was re-applied before serving.
    expect(await models(url2)).toEqual({
      'rollout/policy': 'sleeping',
      'rollout/draft': 'ready',
      'genrm/judge': 'sleeping,held',
    });
    const { events } = (await admin(url2, '/events?kind=operator_intent.reapplied')) as {
      events: Array<{ subject: string }>;
    };
    expect(events.map((e) => e.subject).sort()).toEqual(['genrm/judge', 'rollout/policy']);
    // Discovery agrees: the drained model is not served, the activated one is.
    const discovery = (await (await fetch(`${url2}/rollout/engines`)).json()) as {
      models: Record<string, { engines: Array<{ state: string }> }>;
    };
    expect(discovery.models.policy?.engines.map((e) => e.state)).toEqual(['sleeping']);
    expect(discovery.models.draft?.engines.map((e) => e.state)).toEqual(['ready']);

    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    await within(10_000, () => taggedPids(second.tag).length === 0, 'engines stopped with uis');
  });

  it('with --adopt-engines the restart adopts the same engines, asleep or awake as the operator left them', async () => {
    const args = [
      'serve',
      '--config',
      config,
      '--port',
      '0',
      '--db',
      join(tmp, 'adopt.db'),
      '--adopt-engines',
    ];
    const first = spawnUis(args);
    tags.push(first.tag);
    const url1 = await listening(first);
    await admin(url1, '/roles/genrm/models/judge/drain', {});
    await admin(url1, '/roles/rollout/drain', {});
    await admin(url1, '/roles/rollout/models/draft/activate', {});
    const before = await pids(url1);

    process.kill(first.child.pid as number, 'SIGKILL');
    await first.exited;
    const { uis: second, url: url2 } = await restart(args);
    expect(await models(url2)).toEqual({
      'rollout/policy': 'sleeping',
      'rollout/draft': 'ready',
      'genrm/judge': 'sleeping,held',
    });
    // None started twice: every engine is the process the first uis launched.
    expect(await pids(url2)).toEqual(before);
    second.child.kill('SIGTERM');
    await second.exited;
    await within(
      10_000,
      () => taggedPids(first.tag).length + taggedPids(second.tag).length === 0,
      'engines gone after a clean stop',
    );
  });

  it('a drain killed while it still waits for in-flight work is in force after the restart', async () => {
    const args = ['serve', '--config', config, '--port', '0', '--db', join(tmp, 'mid-drain.db')];
    const first = spawnUis(args);
    tags.push(first.tag);
    const url1 = await listening(first);
    // A long stream whose client reads nothing: the request stays in flight on policy's only replica.
    const stalled = stalledStream(url1);
    await stalled.answering;
    // The drain waits for that request (policy `wait`, a deadline far away): it is accepted, not finished.
    const drain = fetch(`${url1}/admin/roles/rollout/models/policy/drain`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ policy: 'wait', deadline_ms: 600_000 }),
    }).catch(() => null);
    await waitFor(async () => (await models(url1))['rollout/policy'] === 'draining,held', 30_000, 'draining');

    process.kill(first.child.pid as number, 'SIGKILL');
    await first.exited;
    stalled.req.destroy();
    expect(await drain).toBeNull();
    await within(10_000, () => taggedPids(first.tag).length === 0, 'engines of the killed uis gone');

    const { uis: second, url: url2 } = await restart(args);
    expect(await models(url2)).toEqual({
      'rollout/policy': 'sleeping,held',
      'rollout/draft': 'ready',
      'genrm/judge': 'ready',
    });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });
});

/** Every model as `role/model` -> the pids of its replicas. */
async function pids(url: string): Promise<Record<string, number[]>> {
  const { roles } = (await admin(url, '/roles')) as {
    roles: Record<string, { models: Record<string, { replicas: Array<{ pids: number[] }> }> }>;
  };
  return Object.fromEntries(
    Object.entries(roles).flatMap(([role, r]) =>
      Object.entries(r.models).map(([name, m]) => [`${role}/${name}`, m.replicas.flatMap((x) => x.pids)]),
    ),
  );
}

/** POSTs a long streamed generation to policy and never reads the answer; `answering` resolves once its answer
 * began (the gateway counts it in flight until it ends). */
function stalledStream(url: string): { req: ClientRequest; answering: Promise<void> } {
  const { hostname, port } = new URL(url);
  const req = request({
    host: hostname,
    port,
    method: 'POST',
    path: '/rollout/generate',
    headers: { 'content-type': 'application/json' },
  });
  const answering = new Promise<void>((resolve, reject) => {
    req.on('response', (res) => {
      res.pause();
      if (res.statusCode === 200) resolve();
      else reject(new Error(`the stream was answered ${res.statusCode}`));
    });
    req.on('error', reject);
  });
  req.end(
    JSON.stringify({
      model: 'policy',
      text: 'x',
      stream: true,
      sampling_params: { max_new_tokens: 1_000_000, ignore_eos: true },
    }),
  );
  return { req, answering };
}
