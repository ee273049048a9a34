import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Starts `sim-host.ts` in a child process (all the simulators in one Node process) so that their request handling
 * does not share the benchmark's event loop with the control plane being measured. */
export async function startSimHost(specs: Array<Record<string, unknown>>) {
  const script = fileURLToPath(new URL('./sim-host.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(specs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const [first] = (await once(lines, 'line')) as [string];
  const urls = JSON.parse(first) as Record<string, string>;
  return {
    urls,
    stop: async () => {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The simulators split over `processes` child processes (like engines on several nodes, each answering on its
 * own): one process answering all of a fan-out's calls one after another would time itself, not the caller. */
export async function startSimHosts(specs: Array<Record<string, unknown>>, processes: number) {
  const per = Math.ceil(specs.length / processes);
  const hosts = await Promise.all(
    Array.from({ length: Math.ceil(specs.length / per) }, (_, i) =>
      startSimHost(specs.slice(i * per, (i + 1) * per)),
    ),
  );
  return {
    urls: Object.assign({}, ...hosts.map((h) => h.urls)) as Record<string, string>,
    stop: async () => {
      await Promise.all(hosts.map((h) => h.stop()));
    },
  };
}
