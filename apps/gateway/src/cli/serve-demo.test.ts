import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { alive } from '@uis/sglang-engine/testing';
import { afterAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..', '..', '..');
const bin = join(root, 'apps', 'gateway', 'bin', 'uis-dev.mjs');
const tmp = mkdtempSync(join(tmpdir(), 'uis-serve-'));
const children: ChildProcess[] = [];

afterAll(() => {
  // Whatever a failed test left: the whole process group goes.
  for (const c of children) {
    try {
      if (c.pid !== undefined && c.exitCode === null) process.kill(-c.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(tmp, { recursive: true, force: true });
});

/** Starts `uis <args>` in its own process group and resolves with the console URL it prints. */
async function start(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: root,
    detached: true,
    env: { ...process.env, UIS_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL printed within 60 s:\n${out}\n${err}`)), 60_000);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /console\s+(http:\/\/[^\s]+)\//.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before listening:\n${out}\n${err}`));
    });
  });
  return { child, url, output: () => out, errors: () => err };
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = once(child, 'exit');
  child.kill('SIGINT');
  const [code] = (await Promise.race([
    exited,
    new Promise((_, reject) => setTimeout(() => reject(new Error('no exit within 30 s of SIGINT')), 30_000)),
  ])) as [number | null];
  return code;
}

describe('uis serve and uis demo', { timeout: 120_000 }, () => {
  it('uis serve refuses an invalid layout (exit 1, every violation) and an unusable config (exit 2)', () => {
    const run = (text: string) => {
      const file = join(tmp, `c${Math.random().toString(36).slice(2)}.yaml`);
      writeFileSync(file, text);
      return spawnSync(process.execPath, [bin, 'serve', '--config', file, '--port', '0'], {
        cwd: root,
        encoding: 'utf8',
        timeout: 60_000,
      });
    };
    const tooBig = run(
      [
        'cluster: { nodes: [{ name: n, gpus: 1 }] }',
        'roles:',
        '  rollout:',
        '    deployment: { mode: decoupled }',
        '    models: [{ name: p, model_path: /m, weight_source: disk, engine_groups: [{ num_gpus: 4, gpus_per_engine: 1 }] }]',
      ].join('\n'),
    );
    expect(tooBig.status).toBe(1);
    expect(tooBig.stderr).toContain('invalid layout, nothing was started');
    expect(tooBig.stderr).toContain('[capacity_exceeded]');
    const unknown = run('cluster: { nodes: [{ name: n, gpus: 1 }] }\nroles: { rollout: { bogus: 1 } }\n');
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('roles.rollout.bogus');
    expect(unknown.stderr).not.toContain('    at ');
  });

  it('uis serve starts sglang-sim processes from a config and leaves none behind on SIGINT', async () => {
    const config = join(tmp, 'one.yaml');
    writeFileSync(
      config,
      [
        'cluster: { nodes: [{ name: node-0, gpus: 2 }] }',
        'gateway: { admin_token: serve-test-token, launcher: sim }',
        'roles:',
        '  rollout:',
        '    deployment: { mode: decoupled }',
        '    models:',
        '      - { name: policy, model_path: /models/p, weight_source: disk, engine_groups: [{ num_gpus: 2, gpus_per_engine: 1 }] }',
      ].join('\n'),
    );
    const { child, url } = await start(['serve', '--config', config, '--port', '0']);
    const roles = (await (
      await fetch(`${url}/admin/roles`, { headers: { authorization: 'Bearer serve-test-token' } })
    ).json()) as {
      result: { roles: { rollout: { models: { policy: { replicas: Array<{ pids: number[] }> } } } } };
    };
    const pids = roles.result.roles.rollout.models.policy.replicas.flatMap((r) => r.pids);
    expect(pids).toHaveLength(2);
    expect(pids.every(alive)).toBe(true);
    const gen = await fetch(`${url}/rollout/generate`, {
      method: 'POST',
      body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
    });
    expect(gen.status).toBe(200);
    expect(await stop(child)).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
  });

  it('uis demo --db FILE keeps its events across a restart', async () => {
    const db = join(tmp, 'demo.sqlite');
    const events = async (url: string) =>
      (
        (await (
          await fetch(`${url}/admin/events?limit=1000`, {
            headers: { authorization: 'Bearer demo-db-token' },
          })
        ).json()) as { result: { events: Array<{ seq: number; kind: string }> } }
      ).result.events;
    const first = await start(['demo', '--port', '0', '--no-driver', '--db', db], {
      UIS_ADMIN_TOKEN: 'demo-db-token',
    });
    const before = await events(first.url);
    expect(before.length).toBeGreaterThan(0);
    expect(await stop(first.child)).toBe(0);
    const second = await start(['demo', '--port', '0', '--no-driver', '--db', db], {
      UIS_ADMIN_TOKEN: 'demo-db-token',
    });
    const after = await events(second.url);
    // Everything the first run recorded is still there, and the second run added its own start.
    expect(after.map((e) => e.seq)).toEqual(expect.arrayContaining(before.map((e) => e.seq)));
    expect(after.length).toBeGreaterThan(before.length);
    expect(await stop(second.child)).toBe(0);
  });

  it('uis demo serves all three roles, moves phases, and stops cleanly on SIGINT', async () => {
    const { child, url, output } = await start(['demo', '--port', '0'], {
      UIS_ADMIN_TOKEN: 'demo-test-token',
    });
    expect(output()).toContain('admin token demo-test-token');
    for (const role of ['rollout', 'genrm', 'teacher']) {
      const r = await fetch(`${url}/${role}/engines`);
      expect(r.status).toBe(200);
      const snap = (await r.json()) as { role: string; models: Record<string, unknown> };
      expect(snap.role).toBe(role);
      expect(Object.keys(snap.models).length).toBeGreaterThan(0);
    }
    // The driver moves the group out of rollout: wait on discovery (long-poll) until the phase changes.
    let { phase, topology_revision: revision } = (await (await fetch(`${url}/genrm/engines`)).json()) as {
      phase: string;
      topology_revision: number;
    };
    const t0 = Date.now();
    while (phase === 'rollout' && Date.now() - t0 < 60_000) {
      const r = await fetch(`${url}/genrm/engines?wait_revision=${revision}&timeout_s=10`);
      const snap = (await r.json()) as { phase: string; topology_revision: number };
      phase = snap.phase;
      revision = snap.topology_revision;
    }
    expect(['genrm_score', 'teacher_opd', 'train']).toContain(phase);
    const console = await fetch(`${url}/`);
    expect(console.status).toBe(200);
    expect(await stop(child)).toBe(0);
    expect(alive(child.pid as number)).toBe(false);
  });
});
