import { UisError } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { OperationLedger } from './operations.ts';
import { openStore } from './store.ts';
import { outcomeCode } from './testing.ts';

describe('OperationLedger', () => {
  it('returns the stored result to a retry after a restart, without running again', async () => {
    const db = openStore();
    let runs = 0;
    const first = await new OperationLedger(db).run('op-1', { to: 'train' }, async () => {
      runs++;
      return { path: ['train'] };
    });
    const again = await new OperationLedger(db).run('op-1', { to: 'train' }, async () => {
      runs++;
      return { path: ['other'] };
    });
    expect(again).toEqual(first);
    expect(runs).toBe(1);
    expect(await outcomeCode(new OperationLedger(db).run('op-1', { to: 'rollout' }, async () => 1))).toBe(
      'operation_id_conflict',
    );
  });

  it('a failed operation keeps failing with its code; one cut by a restart is reported, not re-run', async () => {
    const db = openStore();
    const ledger = new OperationLedger(db);
    const failing = ledger.run('op-2', {}, async () => {
      throw new UisError({ code: 'memory_not_released', message: 'rollout/0 holds memory' });
    });
    expect(await outcomeCode(failing)).toBe('memory_not_released');
    expect(await outcomeCode(new OperationLedger(db).run('op-2', {}, async () => 'ok'))).toBe(
      'memory_not_released',
    );
    // A process that died mid-operation leaves a running row behind.
    void ledger.run('op-3', {}, () => new Promise(() => {}));
    expect(await outcomeCode(new OperationLedger(db).run('op-3', {}, async () => 'ok'))).toBe(
      'operation_interrupted',
    );
  });

  it('concurrent calls with the same id join one run', async () => {
    const ledger = new OperationLedger(openStore());
    let runs = 0;
    // The run stays open until both calls are made: the second must join it, not start its own.
    let finish = () => {};
    const open = new Promise<void>((r) => {
      finish = r;
    });
    const fn = async () => {
      runs++;
      await open;
      return runs;
    };
    const both = Promise.all([ledger.run('op-4', { x: 1 }, fn), ledger.run('op-4', { x: 1 }, fn)]);
    finish();
    const [a, b] = await both;
    expect([a, b, runs]).toEqual([1, 1, 1]);
  });
});
