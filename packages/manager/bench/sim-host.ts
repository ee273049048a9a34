/** Hosts many in-process sglang-sim servers in one child process so the benchmark's manager process measures the
 * control plane, not the simulators' request handling. Reads a JSON list of sim options on argv[2], prints one
 * JSON line with their URLs, and stops on SIGTERM. */
import { type SimOptionsInput, type SimServer, startSimServer } from '@uis/sglang-sim';

const specs = JSON.parse(process.argv[2] ?? '[]') as Array<SimOptionsInput & { key: string }>;
const servers: SimServer[] = [];
const urls: Record<string, string> = {};
for (const { key, ...opts } of specs) {
  const s = await startSimServer({ host: '127.0.0.1', port: 0, ...opts });
  servers.push(s);
  urls[key] = s.url;
}
process.stdout.write(`${JSON.stringify(urls)}\n`);
process.on('SIGTERM', () => {
  void Promise.all(servers.map((s) => s.close())).then(() => process.exit(0));
});
