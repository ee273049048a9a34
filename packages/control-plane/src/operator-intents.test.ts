import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryLogger } from '@uis/manager';
import { deferConfig, layoutRole } from '@uis/manager/testing';
import { waitFor } from '@uis/sglang-engine/testing';
import { parseConfig } from '@uis/spec';
import { afterAll, describe, expect, it } from 'vitest';
import { commandNamed } from './commands/index.ts';
import { runCommand } from './commands/run-command.ts';
import type { ControlPlane } from './control-plane.ts';
import { createControlPlane } from './create-control-plane.ts';
import { InProcessSimLauncher } from './launchers/in-process-sim-launcher.ts';

const tmp = mkdtempSync(join(tmpdir(), 'uis-intents-'));
const launchers: InProcessSimLauncher[] = [];
afterAll(async () => {
  await Promise.allSettled(launchers.map((l) => l.closeAll()));
  rmSync(tmp, { recursive: true, force: true });
});

/** Rollout serves two models (policy, draft), GenRM one (judge); no activation groups. */
function twoRoles(withDraft = true) {
  const one = (name: string) => ({
    name,
    weight_source: 'static',
    engine_groups: [{ num_gpus: 1, gpus_per_engine: 1 }],
  });
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 4 }] },
    training: { actor_gpus: 0 },
    roles: {
      rollout: layoutRole('decoupled', withDraft ? [one('policy'), one('draft')] : [one('policy')]),
      genrm: layoutRole('decoupled', one('judge')),
    },
  });
}

function start(config: ReturnType<typeof parseConfig>, dbPath: string, logger = new MemoryLogger()) {
  const launcher = new InProcessSimLauncher({ simOnloadMs: 5, simOffloadMs: 5 });
  launchers.push(launcher);
  return createControlPlane({ config, dbPath, launcher, logger });
}

/** Runs a command of the table as the admin REST door would. */
function command(plane: ControlPlane, name: string, params: Record<string, string>, input: unknown = {}) {
  const cmd = commandNamed(name);
  if (!cmd) throw new Error(`no command ${name}`);
  return runCommand(plane, cmd, {
    params,
    input,
    actor: 'ops',
    operationId: null,
    inputRoot: 'body',
    paramsRoot: '',
    fallbackSubject: name,
  });
}

/** Each model of a role: its replicas' states, and `held` when an operator's drain holds it. */
function states(plane: ControlPlane, role: string): Record<string, string> {
  const models = plane.managerOf(role).snapshot().models;
  return Object.fromEntries(
    Object.entries(models).map(([name, m]) => [
      name,
      [...m.replicas.map((r) => r.state), ...(m.held ? ['held'] : [])].join(','),
    ]),
  );
}

const words = (plane: ControlPlane) => plane.intents.list().map((i) => `${i.role}/${i.model}:${i.intent}`);

describe("the operator's word survives a restart", { timeout: 120_000 }, () => {
  it('drains and holds are re-applied before the plane is returned; activations are kept too', async () => {
    const db = join(tmp, 'words.db');
    const first = await start(twoRoles(), db);
    try {
      await command(first, 'drain', { role: 'rollout' });
      await command(first, 'activate_model', { role: 'rollout', model: 'draft' });
      await command(first, 'drain_model', { role: 'genrm', model: 'judge' });
      expect(states(first, 'rollout')).toEqual({ policy: 'sleeping', draft: 'ready' });
      expect(words(first)).toEqual(['rollout/policy:drained', 'genrm/judge:held']);
      // Operators read the standing word (the serving token may: it changes nothing).
      const listed = await command(first, 'list_intents', {});
      expect(listed.result).toEqual({
        intents: [
          expect.objectContaining({ role: 'rollout', model: 'policy', intent: 'drained', actor: 'ops' }),
          expect.objectContaining({ role: 'genrm', model: 'judge', intent: 'held', operation_id: null }),
        ],
      });
    } finally {
      await first.stop();
    }

    const logger = new MemoryLogger();
    const second = await start(twoRoles(), db, logger);
    try {
      // Before anything could be served: the role drain (minus the model activated after it) and the hold.
      expect(states(second, 'rollout')).toEqual({ policy: 'sleeping', draft: 'ready' });
      expect(states(second, 'genrm')).toEqual({ judge: 'sleeping,held' });
      const reapplied = second.events.list({ kind: 'operator_intent.reapplied', limit: 10 });
      expect(reapplied.map((e) => e.subject).sort()).toEqual(['genrm/judge', 'rollout/policy']);
      expect(reapplied[0]?.data).toMatchObject({ actor: 'ops' });
      expect(logger.lines.some((l) => l.msg?.startsWith('operator intent re-applied'))).toBe(true);
      // The operator lifts both: the role's activation and the model's.
      await command(second, 'activate', { role: 'rollout' });
      await command(second, 'activate_model', { role: 'genrm', model: 'judge' });
      expect(words(second)).toEqual([]);
    } finally {
      await second.stop();
    }

    const third = await start(twoRoles(), db);
    try {
      expect(states(third, 'rollout')).toEqual({ policy: 'ready', draft: 'ready' });
      expect(states(third, 'genrm')).toEqual({ judge: 'ready' });
    } finally {
      await third.stop();
    }
  });

  it("the phase schedule lifts a role drain, as it does without a crash; a model's hold outlives it", async () => {
    const db = join(tmp, 'phases.db');
    const config = parseConfig(deferConfig());
    const first = await start(config, db);
    try {
      await command(first, 'drain', { role: 'rollout' });
      await command(first, 'drain_model', { role: 'teacher', model: 'teacher' });
    } finally {
      await first.stop();
    }
    const second = await start(config, db);
    try {
      // The group resumes in rollout, and the operator's drain of rollout is in force again.
      expect(second.coordinator.lease('actor')).toMatchObject({ phase: 'rollout', status: 'held' });
      expect(states(second, 'rollout')).toEqual({ policy: 'sleeping,sleeping' });
      // Round the schedule: rollout -> scorers -> train, then back to rollout, which onloads it.
      await second.coordinator.transition({ group: 'actor', to: 'train', actor: 'test' });
      expect(words(second)).toEqual(['rollout/policy:drained', 'teacher/teacher:held']);
      await second.coordinator.transition({ group: 'actor', to: 'rollout', actor: 'test' });
      expect(states(second, 'rollout')).toEqual({ policy: 'ready,ready' });
      expect(words(second)).toEqual(['teacher/teacher:held']);
    } finally {
      await second.stop();
    }
    const third = await start(config, db);
    try {
      expect(states(third, 'rollout')).toEqual({ policy: 'ready,ready' });
      expect(states(third, 'teacher')).toEqual({ teacher: 'sleeping,held' });
    } finally {
      await third.stop();
    }
  });

  it('a restart whose config no longer has the model drops its word and says so', async () => {
    const db = join(tmp, 'config.db');
    const first = await start(twoRoles(), db);
    try {
      await command(first, 'deactivate_model', { role: 'rollout', model: 'draft' });
      await command(first, 'drain_model', { role: 'rollout', model: 'policy' });
    } finally {
      await first.stop();
    }
    const logger = new MemoryLogger();
    const second = await start(twoRoles(false), db, logger);
    try {
      expect(words(second)).toEqual(['rollout/policy:held']);
      expect(states(second, 'rollout')).toEqual({ policy: 'sleeping,held' });
      const dropped = second.events.list({ kind: 'operator_intent.dropped', limit: 10 });
      expect(dropped.map((e) => e.subject)).toEqual(['rollout/draft']);
      expect(logger.lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toContain(
        'operator intent dropped: the config no longer has this model',
      );
    } finally {
      await second.stop();
    }
  });

  it('writes the word down when the command is accepted, before its engines move (a crash mid-drain keeps it)', async () => {
    const plane = await start(twoRoles(), join(tmp, 'accepted.db'));
    try {
      // A request in flight on policy/0 keeps a waiting drain from finishing.
      const release = plane.managerOf('rollout').inFlight.acquire('policy/0');
      const draining = command(
        plane,
        'drain_model',
        { role: 'rollout', model: 'policy' },
        { policy: 'wait' },
      );
      await waitFor(() => states(plane, 'rollout').policy === 'draining,held', 10_000, 'policy draining');
      expect(words(plane)).toEqual(['rollout/policy:held']);
      release();
      await draining;
      expect(states(plane, 'rollout').policy).toBe('sleeping,held');
    } finally {
      await plane.stop();
    }
  });

  it('refuses a word about a model the role does not have, and writes nothing', async () => {
    const plane = await start(twoRoles(), join(tmp, 'refused.db'));
    try {
      await expect(command(plane, 'drain_model', { role: 'rollout', model: 'nope' })).rejects.toMatchObject({
        code: 'unknown_model',
      });
      await expect(command(plane, 'drain', { role: 'nope' })).rejects.toMatchObject({ code: 'unknown_role' });
      expect(words(plane)).toEqual([]);
    } finally {
      await plane.stop();
    }
  });
});
