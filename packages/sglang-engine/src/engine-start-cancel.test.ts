import { UisError } from '@uis/spec';
import { afterEach, describe, expect, it } from 'vitest';
import { SGLangEngine } from './engine.ts';
import { LocalProcessLauncher } from './launcher.ts';
import { alive, waitUntil } from './sim-harness.ts';

// An engine that never becomes healthy: a process that listens on nothing (its URL refuses connections).
function hangingEngine(id: string): SGLangEngine {
  return new SGLangEngine({
    engineId: id,
    baseUrl: 'http://127.0.0.1:1',
    launcher: new LocalProcessLauncher(),
    launchSpec: {
      engineId: id,
      headUrl: 'http://127.0.0.1:1',
      processes: [
        { nodeRank: 0, node: 'n0', argv: [process.execPath, '-e', 'setInterval(() => {}, 1000)'], env: {} },
      ],
    },
    pollMs: 50,
  });
}

const engines: SGLangEngine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.shutdown(500)));
});

describe('SGLangEngine.start cancellation', { timeout: 30_000 }, () => {
  it('shutdown() during start ends the start at once (engine_start_cancelled), not at its deadline', async () => {
    const engine = hangingEngine('hang/0');
    engines.push(engine);
    const starting = engine.start({ deadlineMs: 600_000 }).catch((e: unknown) => e);
    await waitUntil(() => engine.pids().length === 1);
    const pid = engine.pids()[0]!;
    await engine.shutdown(500);
    const err = await starting;
    expect(err).toBeInstanceOf(UisError);
    expect((err as UisError).code).toBe('engine_start_cancelled');
    expect(alive(pid)).toBe(false);
  });

  it("a caller's abort signal (another replica failed) cancels the start and stops the launched process", async () => {
    const engine = hangingEngine('hang/1');
    engines.push(engine);
    const cancel = new AbortController();
    const starting = engine.start({ deadlineMs: 600_000, signal: cancel.signal }).catch((e: unknown) => e);
    await waitUntil(() => engine.pids().length === 1);
    const pid = engine.pids()[0]!;
    cancel.abort(new Error('replica hang/0 failed'));
    const err = await starting;
    expect((err as UisError).code).toBe('engine_start_cancelled');
    await waitUntil(() => !alive(pid), 5000);
  });

  it('an aborted signal before the launch starts nothing', async () => {
    const engine = hangingEngine('hang/2');
    engines.push(engine);
    const err = await engine.start({ signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect((err as UisError).code).toBe('engine_start_cancelled');
    expect(engine.pids()).toEqual([]);
  });
});
