import { libraryConfig } from '../../scripts/build/library.mjs';

export default [
  // The library entry: @uis/* stay imports of the published packages.
  libraryConfig({ entry: { index: 'src/index.ts' } }),
  // The `uis` CLI: the workspace packages are inlined, so the compiled CLI also runs inside the repo, where
  // @uis/* resolve to TypeScript source. The demo layout ships beside it.
  libraryConfig({
    entry: { uis: 'src/cli/main.ts' },
    outDir: 'dist/cli',
    dts: false,
    clean: false,
    // zod, yaml and commander too: what `uis plan` loads, as one module graph read at once (cold start).
    noExternal: [/^@uis\//, 'zod', /^zod\//, 'yaml', 'commander'],
    copy: [{ from: '../../examples/demo.yaml', to: 'dist' }],
  }),
];
