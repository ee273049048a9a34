import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'spec',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
  },
});
