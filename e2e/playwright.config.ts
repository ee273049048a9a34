import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { defineConfig } from '@playwright/test';

// The console against `uis demo` (a simulated 2-node x 8-GPU cluster with its RL loop running). The config is
// evaluated again in each worker process, so the free port is chosen once and handed down through the env.
const root = join(import.meta.dirname, '..');
if (!process.env.UIS_E2E_PORT) {
  process.env.UIS_E2E_PORT = execFileSync(process.execPath, [
    '-e',
    "const s=require('node:net').createServer();s.listen(0,'127.0.0.1',()=>{process.stdout.write(String(s.address().port));s.close()})",
  ])
    .toString()
    .trim();
}
const port = Number(process.env.UIS_E2E_PORT);
const ADMIN_TOKEN = 'e2e-token';

// UIS_E2E_SERVER=mock runs the console's own mock gateway instead (console development without the gateway).
const server =
  process.env.UIS_E2E_SERVER === 'mock'
    ? `npx tsx apps/console/mock-gateway.ts ${port}`
    : `node apps/gateway/bin/uis-dev.mjs demo --port ${port}`;

export default defineConfig({
  testDir: 'tests',
  outputDir: 'test-results',
  fullyParallel: false,
  workers: 1,
  retries: 0,
  timeout: 120_000,
  expect: { timeout: 30_000 },
  reporter: process.env.PLAYWRIGHT_JSON_OUTPUT_NAME ? [['list'], ['json']] : [['list']],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    viewport: { width: 1440, height: 1000 },
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: '/usr/bin/chromium',
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
  },
  webServer: {
    // The gateway serves the built console at `/`, so build it first (a fresh clone has no dist/).
    command: `pnpm --filter @uis/console build && ${server}`,
    cwd: root,
    url: `http://127.0.0.1:${port}/`,
    timeout: 240_000,
    reuseExistingServer: false,
    stdout: 'pipe',
    stderr: 'pipe',
    env: { UIS_ADMIN_TOKEN: ADMIN_TOKEN, UIS_PORT: String(port), MOCK_TICK_MS: '3000' },
    gracefulShutdown: { signal: 'SIGTERM', timeout: 10_000 },
  },
});
