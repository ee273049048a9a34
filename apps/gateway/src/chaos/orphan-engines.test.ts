import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { adminReplicas } from '../testing/chaos-configs.ts';
import { chaosScratch, listening, spawnUis, taggedPids, within } from '../testing/uis-process.ts';

// Chaos: the control plane dies without running any exit handler. Every engine it launched must follow it.
const { dir: tmp, tags } = chaosScratch('orphans');

const config = join(tmp, 'two-models.yaml');
writeFileSync(
  config,
  [
    'cluster: { nodes: [{ name: node-0, gpus: 4 }] }',
    'gateway: { admin_token: chaos-token, launcher: sim }',
    'roles:',
    '  rollout:',
    '    deployment: { mode: decoupled }',
    '    models:',
    '      - { name: policy, model_path: /models/p, weight_source: disk, engine_groups: [{ num_gpus: 2, gpus_per_engine: 1 }] }',
    '  genrm:',
    '    deployment: { mode: decoupled }',
    '    models:',
    '      - { name: judge, model_path: /models/j, weight_source: static, engine_groups: [{ num_gpus: 2, gpus_per_engine: 1 }] }',
  ].join('\n'),
);

describe('chaos: kill -9 of uis', { timeout: 120_000 }, () => {
  it('leaves no engine process behind within 5 s (sim launcher, 4 engines)', async () => {
    const uis = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(uis.tag);
    const url = await listening(uis);
    const pid = uis.child.pid as number;
    const engines = taggedPids(uis.tag, [pid]);
    const reported = (await adminReplicas(url, 'chaos-token')).flatMap((r) => r.pids);
    expect(reported).toHaveLength(4);
    // Everything else uis started (tsx's esbuild service) must go too, but only engines are counted here.
    expect(engines).toEqual(expect.arrayContaining(reported));

    process.kill(pid, 'SIGKILL');
    await uis.exited;
    const ms = await within(5000, () => taggedPids(uis.tag).length === 0, 'engines gone after kill -9');
    expect(taggedPids(uis.tag)).toEqual([]);
    console.log(`chaos: 4 engines gone ${ms} ms after kill -9 of uis`);
  });
});
