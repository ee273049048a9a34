// A scripted stand-in for python/uis_ray_bridge.py, speaking the same JSON-lines protocol, for RayBridge tests
// that need no Ray. Behaviour per method is fixed below.
import { createInterface } from 'node:readline';

const out = (m) => process.stdout.write(`${JSON.stringify(m)}\n`);
const address = process.argv[process.argv.indexOf('--address') + 1];
if (address === 'fatal') {
  out({ event: 'fatal', code: 'ray_connect_failed', message: 'ConnectionError: no cluster at fatal' });
  process.exit(1);
}
if (address === 'fatal-linger') {
  // Reports the failure, then hangs (e.g. stuck in Ray's shutdown) instead of exiting.
  out({ event: 'fatal', code: 'ray_connect_failed', message: 'ConnectionError: no cluster at fatal-linger' });
  setInterval(() => {}, 1_000);
  await new Promise(() => {});
}
process.stdout.write('not json: a stray print\n');
out({ event: 'ready', ray_version: '0.0.0-fake', namespace: 'uis', nodes: 2 });
const state = { placement_groups: [{ name: 'p', state: 'CREATED' }], actors: [] };
createInterface({ input: process.stdin }).on('line', (line) => {
  const req = JSON.parse(line);
  const { id, method } = req;
  switch (method) {
    case 'state':
      return out({ id, ok: true, result: state });
    case 'free_ports':
      return setTimeout(() => out({ id, ok: true, result: { ports: [4242] } }), 150);
    case 'probe':
      return out({ id, ok: true, result: { bundles: [{ bundle_index: 'zero' }] } });
    case 'remove_pg':
      return out({ id, ok: false, error: { code: 'pg_not_owned', message: 'not ours', path: 'name' } });
    case 'pg_exists':
      return; // never answers
    case 'tail':
      out({
        event: 'actor_exit',
        handle: 'm/0#1',
        code: 3,
        signal: null,
        reason: 'process exited',
        tail: ['boom'],
      });
      return out({ id, ok: true, result: { lines: ['a', 'b'] } });
    case 'start_process':
      return process.exit(3);
    case 'shutdown':
      out({ event: 'closed' });
      return process.exit(0);
  }
});
