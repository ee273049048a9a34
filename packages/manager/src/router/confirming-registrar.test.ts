import type { AddWorkerRequest, RouterWorker } from '@uis/sglang-engine';
import { ManualClock } from '@uis/sglang-engine/testing';
import { describe, expect, it } from 'vitest';
import { ConfirmingRouterRegistrar, type RouterWorkerApi } from './confirming-registrar.ts';

/** A router that accepts every change (202) and shows it in its worker list only once `applied` is set. */
class LaggingRouter implements RouterWorkerApi {
  applied = false;
  lists = 0;
  private readonly workers: RouterWorker[] = [];
  async addWorker(req: AddWorkerRequest): Promise<unknown> {
    this.workers.push({ url: req.url, is_healthy: true } as RouterWorker);
    return { status: 'accepted' };
  }
  async removeWorker(): Promise<void> {}
  async listWorkers(): Promise<RouterWorker[]> {
    this.lists++;
    return this.applied ? this.workers : [];
  }
}

describe('ConfirmingRouterRegistrar', () => {
  it('polls the worker list on its clock and returns once the router shows the change', async () => {
    const clock = new ManualClock();
    const router = new LaggingRouter();
    const registrar = new ConfirmingRouterRegistrar(router, { clock, pollMs: 50, timeoutMs: 1_000 });
    let done = false;
    const adding = registrar.addWorker({ url: 'http://127.0.0.1:1/' }).then(() => {
      done = true;
    });
    await clock.untilPending();
    await clock.advance(500);
    expect(done).toBe(false);
    expect(router.lists).toBe(11);
    router.applied = true;
    await clock.advance(50);
    await adding;
    expect(done).toBe(true);
  });

  it('gives up at its deadline with router_not_applied, not before', async () => {
    const clock = new ManualClock();
    const registrar = new ConfirmingRouterRegistrar(new LaggingRouter(), {
      clock,
      pollMs: 50,
      timeoutMs: 1_000,
    });
    let outcome: unknown = null;
    const adding = registrar.addWorker({ url: 'http://127.0.0.1:1' }).catch((e: unknown) => {
      outcome = e;
    });
    await clock.untilPending();
    await clock.advance(1_000);
    expect(outcome).toBeNull();
    await clock.advance(50);
    await adding;
    expect(outcome).toMatchObject({ code: 'router_not_applied' });
    expect((outcome as Error).message).toContain(
      'in 1000 ms: worker http://127.0.0.1:1 registered and healthy',
    );
  });
});
