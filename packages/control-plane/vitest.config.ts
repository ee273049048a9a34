import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'control-plane',
    include: ['src/**/*.test.ts'],
  },
});
