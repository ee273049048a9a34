import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

// The clusters the chaos tests run `uis serve` on, written as the YAML an operator would write. Each test names
// what it varies (the token, adoption, the engines' simulated timings); the rest of the cluster is shared.

/** Rollout (two engines, one GPU each) and GenRM (one engine on both GPUs) take turns on a node of 2 GPUs, with a
 * trainer phase after them. `policyArgs`/`judgeArgs` are the engines' server_args (simulated timings). */
export function writeTakeTurnsConfig(
  dir: string,
  name: string,
  opts: { token: string; adopt: boolean; policyArgs?: string; judgeArgs?: string },
): string {
  const file = join(dir, `${name}.yaml`);
  const args = (a: string | undefined) => (a === undefined ? '' : `, server_args: ${a}`);
  writeFileSync(
    file,
    [
      'cluster: { nodes: [{ name: node-0, gpus: 2 }] }',
      'training: { actor_gpus: 2, offload_train: true }',
      `gateway: { admin_token: ${opts.token}, launcher: sim, adopt_engines: ${opts.adopt}, db_path: ${join(dir, `${name}.db`)} }`,
      'roles:',
      '  rollout:',
      '    deployment: { mode: colocated_split, offload: true }',
      '    routing: { default_model: policy }',
      '    models:',
      `      - { name: policy, model_path: /models/p, weight_source: disk, engine_groups: [{ num_gpus: 2, gpus_per_engine: 1${args(opts.policyArgs)} }] }`,
      '  genrm:',
      '    deployment: { mode: colocated_defer, offload: true }',
      '    routing: { default_model: judge }',
      '    models:',
      `      - { name: judge, model_path: /models/j, weight_source: static, engine_groups: [{ num_gpus: 2, gpus_per_engine: 2${args(opts.judgeArgs)} }] }`,
      'schedule:',
      '  activation_groups:',
      '    - name: actor',
      '      phases: [{ name: rollout, residents: [rollout] }, { name: genrm_score, residents: [genrm] }, { name: train, residents: [train] }]',
    ].join('\n'),
  );
  return file;
}

/** One decoupled rollout model, one engine per GPU, with adoption on and its database at `db`. */
export function writeAdoptingRolloutConfig(
  file: string,
  opts: { token: string; gpus: number; db: string },
): string {
  writeFileSync(
    file,
    [
      `cluster: { nodes: [{ name: node-0, gpus: ${opts.gpus} }] }`,
      `gateway: { admin_token: ${opts.token}, launcher: sim, adopt_engines: true, db_path: ${opts.db} }`,
      'roles:',
      '  rollout:',
      '    deployment: { mode: decoupled }',
      '    models:',
      `      - { name: policy, model_path: /models/p, weight_source: disk, engine_groups: [{ num_gpus: ${opts.gpus}, gpus_per_engine: 1 }] }`,
    ].join('\n'),
  );
  return file;
}

/** A replica as the admin snapshot (`GET /admin/roles`) shows it. */
export interface AdminReplica {
  engine_id: string;
  pids: number[];
  base_url: string;
  state: string;
}

/** Every replica of every role and model, as the running `uis` at `url` reports them. */
export async function adminReplicas(url: string, token: string): Promise<AdminReplica[]> {
  const r = await fetch(`${url}/admin/roles`, { headers: { authorization: `Bearer ${token}` } });
  const body = (await r.json()) as {
    result: { roles: Record<string, { models: Record<string, { replicas: AdminReplica[] }> }> };
  };
  return Object.values(body.result.roles).flatMap((role) =>
    Object.values(role.models).flatMap((m) => m.replicas),
  );
}
