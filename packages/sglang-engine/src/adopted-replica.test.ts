import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  AdoptedReplica,
  identifyProcess,
  processStartTime,
  recordProcesses,
  stopRecordedProcesses,
} from './adopted-replica.ts';
import { forceStopEngines, LocalProcessLauncher } from './launcher.ts';
import { alive } from './testing.ts';
import { waitFor } from './wait-for.ts';

const spawned: number[] = [];
const logDir = mkdtempSync(join(tmpdir(), 'uis-kept-logs-'));
afterAll(() => {
  for (const pid of spawned) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(logDir, { recursive: true, force: true });
});

/** A detached idle process (its own process group), as engines are launched. */
function idle(): number {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], {
    detached: true,
    stdio: 'ignore',
  });
  child.unref();
  spawned.push(child.pid as number);
  return child.pid as number;
}

describe('recorded engine processes', () => {
  it('tells the recorded process from a reused pid by its start time', () => {
    const pid = idle();
    const [rec] = recordProcesses([pid]);
    expect(rec?.startTime).toMatch(/^\d+$/);
    expect(identifyProcess(rec!)).toBe('same');
    expect(identifyProcess({ pid, startTime: '1' })).toBe('gone');
    expect(identifyProcess({ pid, startTime: null })).toBe('unverifiable');
    expect(processStartTime(2 ** 22 + 7)).toBeNull();
    expect(identifyProcess({ pid: 2 ** 22 + 7, startTime: '5' })).toBe('gone');
  });

  it('stops only processes verified to be the recorded engine', async () => {
    const ours = idle();
    const stranger = idle();
    const left = await stopRecordedProcesses(
      [
        ...recordProcesses([ours]),
        // The pid of another process now (its start time differs from the record): never signalled.
        { pid: stranger, startTime: '1' },
      ],
      1_000,
    );
    expect(left).toEqual([]);
    await waitFor(() => !alive(ours), 5_000, 'recorded process stopped');
    expect(alive(stranger)).toBe(true);
    // Running but without a start time to compare: left alone and reported.
    const unverified = await stopRecordedProcesses([{ pid: stranger, startTime: null }], 500);
    expect(unverified.map((p) => p.pid)).toEqual([stranger]);
    expect(alive(stranger)).toBe(true);
  });

  it('an adopted replica stops its recorded processes (SIGKILL after the grace when SIGTERM is ignored)', async () => {
    const child = spawn(
      process.execPath,
      ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"],
      { detached: true, stdio: 'ignore' },
    );
    child.unref();
    const pid = child.pid as number;
    spawned.push(pid);
    await waitFor(() => processStartTime(pid) !== null, 5_000);
    const replica = new AdoptedReplica(recordProcesses([pid]));
    expect(replica.pids()).toEqual([pid]);
    await replica.stop(300);
    // Gone for the kernel; this test process (its parent) reaps it a moment later.
    await waitFor(() => !alive(pid), 5_000, 'adopted engine stopped');
  });

  it('the shutdown deadline (forceStopEngines) kills adopted engines not stopped yet, and names them', async () => {
    const pid = idle();
    const replica = new AdoptedReplica(recordProcesses([pid]), 'policy/7');
    expect(forceStopEngines()).toContain(`policy/7 (pid ${pid}, adopted)`);
    await waitFor(() => !alive(pid), 5_000, 'adopted engine killed');
    await replica.stop(100);
    expect(forceStopEngines()).not.toContain(`policy/7 (pid ${pid}, adopted)`);
  });
});

describe('engines kept for adoption (watchdog: false)', () => {
  it('write their output to a log file, which outlives a broken pipe, and the tail reads it', async () => {
    const launcher = new LocalProcessLauncher({ watchdog: false, logDir });
    const replica = await launcher.launch({
      engineId: 'kept/1',
      headUrl: 'http://127.0.0.1:1',
      processes: [
        {
          nodeRank: 0,
          node: 'n0',
          argv: [process.execPath, '-e', "console.log('hello from the engine'); setInterval(() => {}, 1000)"],
          env: {},
        },
      ],
    });
    try {
      await waitFor(() => replica.logTail().includes('hello from the engine'), 5_000, 'log line in the file');
      expect(replica.logTail()).toMatch(/^\[node 0\] hello from the engine$/m);
    } finally {
      await replica.stop(500);
    }
  });
});
