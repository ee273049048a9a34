import { libraryConfig } from '../../scripts/build/library.mjs';

export default libraryConfig({ entry: { index: 'src/index.ts' } });
