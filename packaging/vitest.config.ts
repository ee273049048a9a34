import { defineProject } from 'vitest/config';

// Not one of the root config's projects: scripts/test-all.mjs runs it on its own, after the unit tests, because it
// builds, packs and installs the packages (minutes, network to the npm registry for third-party dependencies).
export default defineProject({
  root: import.meta.dirname,
  test: {
    name: 'packaging',
    include: ['*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 600_000,
  },
});
