import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'sglang-engine',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
  },
});
