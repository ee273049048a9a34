/**
 * The multi-core data-plane prototype's process: the owner thread (where the control plane would run: it holds
 * the topology, flips drain flags, reads exact in-flight counts) and N serving worker threads on one listening
 * socket, all sharing their routing state through shared-routing.ts.
 *   tsx multicore/gateway.ts --engines http://127.0.0.1:30001 --workers 2 --role rollout
 * Prints `{"port": N, "control": M, "tids": [...]}` once every worker listens; `GET /stats` on the control port
 * answers each worker thread's CPU time (from /proc) and the shared state (admitted, in-flight per replica).
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { SharedRouting } from './shared-routing.ts';

const { values } = parseArgs({
  options: {
    engines: { type: 'string' },
    workers: { type: 'string', default: '1' },
    role: { type: 'string', default: 'rollout' },
    'admission-limit': { type: 'string', default: '100000' },
  },
});
const engines = (values.engines ?? '').split(',').filter((u) => u !== '');
if (engines.length === 0) throw new Error('--engines is required');
const shared = SharedRouting.create(engines.length, Number(values['admission-limit']));
const workerFile = new URL('./worker-entry.mjs', import.meta.url);

function startWorker(fd?: number): Promise<{ worker: Worker; tid: number; fd: number; port: number }> {
  const worker = new Worker(workerFile, {
    workerData: { buffers: shared.buffers, engines, role: values.role, ...(fd === undefined ? {} : { fd }) },
  });
  return new Promise((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', (m: { tid: number; fd: number; port: number }) => resolve({ worker, ...m }));
  });
}

/** CPU time (ms) of one thread of this process. */
function threadCpuMs(tid: number): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of stat, in clock ticks (100 per second on Linux).
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

const first = await startWorker();
const workers = [first];
for (let i = 1; i < Number(values.workers); i++) workers.push(await startWorker(first.fd));

const control = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      workers: workers.map((w) => ({ tid: w.tid, cpuMs: threadCpuMs(w.tid) })),
      admitted: shared.admitted,
      inFlight: engines.map((_, r) => shared.inFlight(r)),
    }),
  );
});
control.listen(0, '127.0.0.1', () => {
  const port = (control.address() as { port: number }).port;
  process.stdout.write(
    `${JSON.stringify({ port: first.port, control: port, tids: workers.map((w) => w.tid) })}\n`,
  );
});
const stop = () => process.exit(0);
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
