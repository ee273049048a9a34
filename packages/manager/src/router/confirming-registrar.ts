import type { AddWorkerRequest, RouterWorker } from '@uis/sglang-engine';
import { type Clock, systemClock, UisError } from '@uis/spec';
import type { RouterRegistrar } from '../inference-manager.ts';

/** What the registrar needs of a router client (`SGLangRouterClient` has it). */
export interface RouterWorkerApi {
  addWorker(req: AddWorkerRequest): Promise<unknown>;
  removeWorker(url: string): Promise<void>;
  listWorkers(): Promise<RouterWorker[]>;
}

export interface ConfirmingRegistrarOptions {
  /** How long the router may take to apply a change. Default 30 s. */
  timeoutMs?: number;
  pollMs?: number;
  /** The deadline's and the polls' time source. */
  clock?: Clock;
}

const trim = (u: string) => u.replace(/\/+$/, '');

/** The real router applies `POST /workers` and `DELETE /workers/{id}` in a background job (202 Accepted). The
 * manager must know a worker is gone BEFORE its engine sleeps (else the router may still send it work), and
 * that a worker is routable before it counts as registered; so each call returns only once the router's worker
 * list shows the change. */
export class ConfirmingRouterRegistrar implements RouterRegistrar {
  constructor(
    private readonly client: RouterWorkerApi,
    private readonly opts: ConfirmingRegistrarOptions = {},
  ) {}

  async addWorker(req: AddWorkerRequest): Promise<unknown> {
    const answer = await this.client.addWorker(req);
    await this.until(`worker ${req.url} registered and healthy`, (ws) =>
      ws.some((w) => trim(w.url) === trim(req.url) && w.is_healthy !== false),
    );
    return answer;
  }

  async removeWorker(url: string): Promise<void> {
    await this.client.removeWorker(url);
    await this.until(`worker ${url} removed`, (ws) => !ws.some((w) => trim(w.url) === trim(url)));
  }

  private async until(what: string, done: (workers: RouterWorker[]) => boolean): Promise<void> {
    const timeoutMs = this.opts.timeoutMs ?? 30_000;
    const clock = this.opts.clock ?? systemClock;
    const deadline = clock.now() + timeoutMs;
    for (;;) {
      if (done(await this.client.listWorkers())) return;
      if (clock.now() > deadline)
        throw new UisError({
          code: 'router_not_applied',
          path: 'router',
          message: `the router did not apply the change in ${timeoutMs} ms: ${what}`,
        });
      await clock.sleep(this.opts.pollMs ?? 50);
    }
  }
}
