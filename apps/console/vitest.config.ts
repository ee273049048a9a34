import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'console',
    environment: 'happy-dom',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
    setupFiles: ['testing/setup.ts'],
  },
});
