import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'sglang-sim',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
    // Real HTTP and child processes on a shared 2-core machine: generous, never a speed assertion.
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
