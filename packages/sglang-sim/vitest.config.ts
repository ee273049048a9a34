import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'sglang-sim',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
  },
});
