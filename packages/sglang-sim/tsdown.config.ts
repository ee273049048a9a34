import { libraryConfig } from '../../scripts/build/library.mjs';

// `cli` is what the published `sglang-sim` bin runs (bin/sglang-sim.mjs runs src/cli.ts when the source is there).
export default libraryConfig({ entry: { index: 'src/index.ts', cli: 'src/cli.ts' } });
