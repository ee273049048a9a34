import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'manager',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
  },
});
