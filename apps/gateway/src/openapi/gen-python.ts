import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { currentPythonClient } from './python-client.ts';

// `pnpm gen:python`: rewrites the generated files of the Python client (clients/python) from the command table.
const root = join(import.meta.dirname, '../../../..');
for (const f of currentPythonClient()) {
  writeFileSync(join(root, f.path), f.text);
  console.log(`wrote ${f.path}`);
}
