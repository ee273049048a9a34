/** Fixture of launcher.test.ts: launches a replica, prints its pid, then exits without stopping it (`exit`), or
 * is killed by SIGKILL, which runs no exit handler (`kill-9`). */
import { LocalProcessLauncher } from './launcher.ts';

const replica = await new LocalProcessLauncher().launch({
  engineId: 'orphan/0',
  headUrl: 'http://127.0.0.1:1',
  processes: [
    { nodeRank: 0, node: 'n0', argv: [process.execPath, '-e', 'setInterval(() => {}, 1000)'], env: {} },
  ],
});
console.log(`pid=${replica.pids()[0]}`);
if (process.argv[2] === 'kill-9') process.kill(process.pid, 'SIGKILL');
process.exit(0);
