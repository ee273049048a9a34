/**
 * One serving worker thread of the multi-core prototype: the gateway's forwarding core (fast routes, body parse,
 * engine pool, relay) with its routing state in the shared buffers (shared-routing.ts) instead of this thread's
 * memory. The first worker opens the listening socket and hands its descriptor to the owner; the others accept on
 * the same descriptor (each thread's event loop polls it, the kernel gives each connection to one of them).
 */
import { readlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { UisError } from '@uis/spec';
import { AdmissionGate, type Admittable } from '../../src/proxy/admission.ts';
import {
  createServingHandler,
  FastRoutes,
  GENERATE_EDIT,
  InFlightCounter,
  type ProxyTarget,
  rolePaths,
  UpstreamPools,
} from '../../src/proxy/index.ts';
import { SharedRouting, type SharedRoutingBuffers } from './shared-routing.ts';

const data = workerData as { buffers: SharedRoutingBuffers; engines: string[]; role: string; fd?: number };
const shared = new SharedRouting(data.buffers);
const targets: ProxyTarget[] = data.engines.map((origin, i) => ({ id: String(i), origin }));

/** Counted in `pick` already (the compare-and-swap that chose the replica): acquire adds nothing. */
class SharedInFlight extends InFlightCounter {
  override acquire(): void {}
  override release(targetId: string): void {
    shared.release(Number(targetId));
  }
}

/** The role's admission limit across every worker (refusal when full; a shared wait queue is the design note's). */
class SharedAdmission extends AdmissionGate {
  override enter(w: Admittable): void {
    if (shared.admit()) w.admitted();
    else
      w.turnedAway(
        new UisError({
          code: 'admission_rejected',
          path: 'role',
          message: 'the role admission limit is reached',
        }),
        1,
      );
  }
  override leave(): void {
    shared.leave();
  }
  override cancel(): void {}
}

const pick = (excluding?: ReadonlySet<string>): ProxyTarget | UisError => {
  const exclude = excluding === undefined ? undefined : new Set([...excluding].map(Number));
  const r = shared.pickLeastOutstanding(performance.now(), exclude);
  return r < 0 ? new UisError({ code: 'no_replica', message: 'no eligible replica' }) : targets[r]!;
};

const options = {
  pools: new UpstreamPools(),
  inFlight: new SharedInFlight(),
  admission: new SharedAdmission({ limit: 0, queue: 0, queueTimeoutMs: 0 }),
  hooks: {
    onComplete: (e: { target?: ProxyTarget | undefined; outcome: string }) => {
      if (e.target !== undefined && e.outcome === 'ok') shared.success(Number(e.target.id));
    },
  },
};
const routes = new FastRoutes().add(
  'POST',
  rolePaths(data.role).generate,
  createServingHandler(options, () => ({ path: '/generate', pick, edit: GENERATE_EDIT })),
);
const server = createServer({ keepAliveTimeout: 120_000 }, (req, res) => {
  const handler = routes.match(req.method, req.url);
  if (handler !== undefined) handler(req, res);
  else {
    res.writeHead(404).end();
  }
});
// This thread's kernel id, so the bench can pin it to one core (`taskset -p -c N tid`).
const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
const ready = () => {
  const fd = (server as unknown as { _handle: { fd: number } })._handle.fd;
  parentPort!.postMessage({ tid, fd, port: (server.address() as { port: number }).port });
};
if (data.fd === undefined) server.listen(0, '127.0.0.1', ready);
else server.listen({ fd: data.fd }, ready);
