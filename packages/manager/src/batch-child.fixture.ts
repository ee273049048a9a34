/** Child process of `batch-resume.test.ts`: runs one batch against a scorer URL, one sample at a time, until the
 * test SIGKILLs it mid-batch. Usage: node --import tsx batch-child.fixture.ts <db> <scorer url> <batch id>. */
import { SGLangClient } from '@uis/sglang-engine';
import { BatchRunner } from './batch-runner.ts';
import { BatchStore } from './batch-store.ts';
import { judgementScore } from './score-parsers.ts';
import { openStore } from './store.ts';

const [dbPath, url, batchId] = process.argv.slice(2);
if (!dbPath || !url || !batchId) {
  process.stderr.write('usage: batch-child.fixture.ts <db> <scorer url> <batch id>\n');
  process.exit(2);
}
const store = new BatchStore(openStore(dbPath));
const client = new SGLangClient(url);
const runner = new BatchRunner({
  store,
  targets: () => [{ engineId: 'judge/0', servedModelName: 'judge', client }],
  concurrency: 1,
  scoreParser: judgementScore,
});
await runner.run(batchId);
process.stdout.write('committed\n');
await client.close();
