import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'routing',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
  },
});
