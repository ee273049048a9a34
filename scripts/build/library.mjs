// The one build recipe of the workspace's library packages: ESM JavaScript for Node 20 plus bundled `.d.ts`,
// built by tsdown. Declarations come from the repo's own TypeScript 7 compiler (the native `tsc`), which
// rolldown-plugin-dts runs in its `tsgo` mode: TypeScript 7 has no JavaScript compiler API for the classic mode.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { defineConfig } from 'tsdown';

const typescriptDir = dirname(createRequire(import.meta.url).resolve('typescript/package.json'));
const { default: getExePath } = await import(pathToFileURL(join(typescriptDir, 'lib', 'getExePath.js')).href);

/** tsdown options for a library package: `entry` maps output names to source files. */
export function libraryConfig({ entry, ...rest }) {
  return defineConfig({
    entry,
    format: 'esm',
    platform: 'node',
    target: 'node20.19',
    outDir: 'dist',
    clean: true,
    dts: { tsgo: { path: getExePath() } },
    ...rest,
  });
}
