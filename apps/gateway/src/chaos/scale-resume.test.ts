import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '@uis/sglang-engine/testing';
import type { ScaleOperation } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { chaosScratch, listening, spawnUis, taggedPids } from '../testing/uis-process.ts';

// Chaos: uis is killed (SIGKILL) while a scale-out is launching its engines; the next uis on the same --db resumes it.
const { dir: tmp, tags } = chaosScratch('scale');

const config = join(tmp, 'elastic.yaml');
const db = join(tmp, 'uis.db');
writeFileSync(
  config,
  [
    'cluster: { nodes: [{ name: node-0, gpus: 4 }] }',
    'gateway: { admin_token: chaos-token, launcher: sim }',
    'roles:',
    '  rollout:',
    '    deployment: { mode: decoupled }',
    '    models:',
    '      - name: policy',
    '        model_path: /models/p',
    '        weight_source: disk',
    '        elastic_enabled: true',
    '        engine_groups:',
    // Every engine takes 3 s to come up: the scale-out is still creating its engines when uis dies.
    '          - { num_gpus: 2, gpus_per_engine: 1, server_args: { sim_startup_ms: 3000 } }',
    '          - { worker_type: placeholder, num_gpus: 2, gpus_per_engine: 1 }',
  ].join('\n'),
);

const auth = { authorization: 'Bearer chaos-token', 'content-type': 'application/json' };

async function admin<T>(url: string, path: string, body?: object): Promise<T> {
  const res = await fetch(`${url}/admin${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: auth,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = (await res.json()) as { result: T };
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(answer)}`);
  return answer.result;
}

type Roles = {
  roles: Record<string, { models: Record<string, { replicas: Array<{ state: string; pids: number[] }> }> }>;
};

describe('chaos: kill -9 of uis during a scale-out', { timeout: 240_000 }, () => {
  it('the next uis on the same --db resumes the operation to ACTIVE; no engine of the dead run is left', async () => {
    const args = ['serve', '--config', config, '--port', '0', '--db', db];
    const first = spawnUis(args);
    tags.push(first.tag);
    const url1 = await listening(first);
    const op = await admin<ScaleOperation>(url1, '/roles/rollout/scale_out', { num_replicas: 4 });
    expect(op.status).toBe('PENDING');
    await waitFor(
      async () => (await admin<ScaleOperation>(url1, `/scale_ops/${op.request_id}`)).status === 'CREATING',
      30_000,
      'the scale-out to be creating its engines',
    );
    first.child.kill('SIGKILL');
    await first.exited;

    const second = spawnUis(args);
    tags.push(second.tag);
    const url2 = await listening(second);
    const resumed = await waitFor(
      async () => {
        const o = await admin<ScaleOperation>(url2, `/scale_ops/${op.request_id}`);
        return ['ACTIVE', 'FAILED', 'CANCELLED'].includes(o.status) ? o : undefined;
      },
      60_000,
      'the resumed scale-out to finish',
    );
    expect(resumed).toMatchObject({ status: 'ACTIVE', engine_ids: ['policy/2', 'policy/3'] });
    const { roles } = await admin<Roles>(url2, '/roles');
    const replicas = roles.rollout?.models.policy?.replicas ?? [];
    expect(replicas.map((r) => r.state)).toEqual(['ready', 'ready', 'ready', 'ready']);
    // Whatever the dead run started and the new one did not adopt is gone (the engines' watchdogs, adoption).
    const served = new Set(replicas.flatMap((r) => r.pids));
    await waitFor(
      () => taggedPids(first.tag).every((p) => served.has(p)),
      15_000,
      'no stray engine of the dead run',
    );
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });
});
