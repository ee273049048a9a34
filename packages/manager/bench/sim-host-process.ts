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
