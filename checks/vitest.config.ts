import { defineProject } from 'vitest/config';

// Checks of the repository's shape (sizes of files and functions, package dependencies and layers): they read
// the source, they run no product code.
export default defineProject({
  test: {
    name: 'checks',
    include: ['*.test.ts'],
  },
});
