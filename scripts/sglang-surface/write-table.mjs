// `pnpm sglang:table`: writes the release table of packages/sglang-engine/README.md from the committed surfaces
// (renderVersionTable in packages/sglang-engine/src/sglang-features.ts; run with tsx, which loads the TypeScript).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  README_TABLE_MARKERS,
  renderVersionTable,
} from '../../packages/sglang-engine/src/sglang-features.ts';

const readme = join(import.meta.dirname, '..', '..', 'packages', 'sglang-engine', 'README.md');
const text = readFileSync(readme, 'utf8');
const [start, end] = README_TABLE_MARKERS;
const a = text.indexOf(start);
const b = text.indexOf(end);
if (a === -1 || b < a) {
  process.stderr.write(`sglang:table: ${readme} has no ${start} ... ${end} section\n`);
  process.exit(2);
}
writeFileSync(readme, `${text.slice(0, a + start.length)}\n${renderVersionTable()}\n${text.slice(b)}`);
console.log(`sglang:table: wrote the release table of ${readme}`);
