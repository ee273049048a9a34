import type { ReplicaTable } from './replica-table.ts';
import type { Audit, RouterRegistrar, Slot } from './types.ts';

/** Keeps each model's SGLang router listing exactly its eligible replicas (PD workers with their type once ready
 * at the right version). Owns `slot.router`: the URL registered and the URLs whose removal must be retried. */
export class RouterSync {
  constructor(
    private readonly replicas: ReplicaTable,
    private readonly routers: Record<string, RouterRegistrar>,
    private readonly audit: Audit,
  ) {}

  has(model: string): boolean {
    return this.routers[model] !== undefined;
  }

  /** Adds the eligible, removes the rest; throws the first failure after every job settled. `record` collects
   * the replicas registered now (a failed start unregisters them). */
  async sync(record?: Slot[]): Promise<void> {
    const jobs: Array<Promise<void>> = [];
    for (const s of this.replicas.all()) {
      const router = this.routers[s.model];
      if (router) jobs.push(...this.syncSlot(s, router, record));
    }
    const results = await Promise.allSettled(jobs);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed && failed.status === 'rejected') throw failed.reason;
  }

  private syncSlot(s: Slot, router: RouterRegistrar, record?: Slot[]): Array<Promise<void>> {
    const jobs: Array<Promise<void>> = [];
    const want = s.state === 'ready' && s.baseUrl !== null && this.replicas.versionOk(s);
    // An entry that is not the replica's current wanted URL goes: a replica that left service, or the URL of an
    // earlier incarnation whose removal failed (a restarted replica comes back on another port).
    if (s.router.url !== null && (!want || s.router.url !== s.baseUrl)) {
      s.router.stale.push(s.router.url);
      s.router.url = null;
    }
    const removals = s.router.stale.splice(0).map((url) =>
      router.removeWorker(url).then(
        () => this.audit('router.removed', s.engineId, { url }),
        (e: unknown) => {
          s.router.stale.push(url);
          throw e;
        },
      ),
    );
    jobs.push(...removals);
    if (want && !s.router.url) {
      const url = s.baseUrl as string;
      const wt = s.replica.worker_type === 'placeholder' ? 'regular' : s.replica.worker_type;
      jobs.push(
        // After the removals settle (one may be this very URL), whatever they answered: the replica serves.
        Promise.allSettled(removals)
          .then(() =>
            router.addWorker({
              url,
              worker_type: wt,
              ...(wt === 'prefill' && s.engine?.bootstrapPort !== undefined
                ? { bootstrap_port: s.engine.bootstrapPort }
                : {}),
            }),
          )
          .then(() => {
            s.router.url = url;
            record?.push(s);
            this.audit('router.added', s.engineId, { url });
          }),
      );
    }
    return jobs;
  }

  /** Unregisters what `slots` registered (a rolled-back start), best effort. */
  async unregister(slots: Slot[]): Promise<void> {
    await Promise.allSettled(
      slots.map(async (s) => {
        const router = this.routers[s.model];
        if (router && s.router.url) await router.removeWorker(s.router.url);
      }),
    );
  }

  /** Removes every URL the routers may list for `slots` (shutdown), best effort. */
  async removeAll(slots: Slot[]): Promise<void> {
    await Promise.allSettled(
      slots.map(async (s) => {
        const router = this.routers[s.model];
        const urls = [...(s.router.url ? [s.router.url] : []), ...s.router.stale.splice(0)];
        s.router.url = null;
        if (router) await Promise.allSettled(urls.map((u) => router.removeWorker(u)));
      }),
    );
  }
}
