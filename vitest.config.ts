import { defineConfig } from 'vitest/config';

// Each package keeps its own vitest.config.ts; the root gathers them as projects so `pnpm test` runs all (with the
// repository checks in checks/).
export default defineConfig({
  test: {
    projects: ['packages/*', 'apps/*', 'checks'],
  },
});
