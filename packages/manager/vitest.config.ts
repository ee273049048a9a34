import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'manager',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
    // Tests start real simulator processes; on a loaded 2-core machine a start can take seconds.
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
});
