import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chaosScratch, listening, spawnUis } from '../testing/uis-process.ts';

// Chaos: a token guesser on the operator's own address (a local process) hammers the compiled `uis` while the
// operator works. The guesser is throttled (429) and the lockout logged; the operator's valid tokens always pass.
// (The exact counts per window are tested on the injected clock in read-auth.test.ts.)
const { dir: tmp, tags } = chaosScratch('lockout');
const ADMIN = 'chaos-lockout-admin';
const SERVING = 'chaos-lockout-serving';
const config = join(tmp, 'lockout.yaml');
writeFileSync(
  config,
  [
    'cluster: { nodes: [{ name: node-0, gpus: 1 }] }',
    `gateway: { admin_token: ${ADMIN}, serving_token: ${SERVING}, launcher: sim }`,
    'roles:',
    '  rollout:',
    '    deployment: { mode: decoupled }',
    '    models:',
    '      - { name: policy, model_path: /models/p, weight_source: disk, engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }] }',
  ].join('\n'),
);

describe('chaos: a token guesser cannot lock the operator out', { timeout: 120_000 }, () => {
  it('400 bad guesses back to back from the same address (4 at a time, as fast as the server answers): every operator call meanwhile succeeds, the guesser gets 429', async () => {
    const uis = spawnUis(['serve', '--config', config, '--port', '0']);
    tags.push(uis.tag);
    const url = await listening(uis);
    const get = async (path: string, token: string) => {
      const r = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      await r.arrayBuffer();
      return r.status;
    };
    const attacker: number[] = [];
    const operator: number[] = [];
    // Counted, not timed: on a loaded machine a timed window holds fewer guesses, and the point is the flood.
    let guessing = 4;
    const guess = async (g: number) => {
      // Back to back: as fast as the server answers (hundreds a second on a quiet machine).
      for (let i = 0; i < 100; i++)
        attacker.push(await get('/rollout/engines', `guess-${g}-${i}-xxxxxxxxxx`));
      guessing--;
    };
    const work = async () => {
      const calls: Array<[string, string]> = [
        ['/rollout/engines', SERVING],
        ['/admin/roles', ADMIN],
        ['/admin/phases', SERVING],
      ];
      for (let i = 0; guessing > 0 || i < 10; i++) {
        const [path, token] = calls[i % calls.length] as [string, string];
        operator.push(await get(path, token));
      }
    };
    await Promise.all([guess(0), guess(1), guess(2), guess(3), work()]);
    expect(operator.length).toBeGreaterThanOrEqual(10);
    expect(operator.every((s) => s === 200)).toBe(true);
    expect(attacker.length).toBe(400);
    expect(attacker.filter((s) => s === 429).length).toBeGreaterThan(0);
    expect(attacker.every((s) => s === 401 || s === 429)).toBe(true);
    uis.child.kill('SIGTERM');
    expect(await uis.exited).toBe(0);
    expect(uis.errors()).toContain('client locked out after too many failed authentications');
  });
});
