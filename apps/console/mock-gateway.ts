import { join } from 'node:path';
import { startMockGateway } from './testing/mock-gateway-server.ts';

// `npx tsx apps/console/mock-gateway.ts [port]`: the console contract with a simulated demo state, serving the
// built console (`vite build` first) at `/`. Admin token: UIS_ADMIN_TOKEN or `mock-token`.
const port = Number(process.argv[2] ?? process.env.UIS_PORT ?? 8080);
const gateway = await startMockGateway({
  port,
  adminToken: process.env.UIS_ADMIN_TOKEN ?? 'mock-token',
  // UIS_SERVING_TOKEN: reads need it (or the admin token), to try the console's read-only sign-in.
  ...(process.env.UIS_SERVING_TOKEN ? { servingToken: process.env.UIS_SERVING_TOKEN } : {}),
  distDir: join(import.meta.dirname, 'dist'),
  tickMs: Number(process.env.MOCK_TICK_MS ?? 4000),
  // MOCK_MOVED=1 runs policy/1 on node-1 GPUs 4-7 instead of where the plan put it.
  moved: process.env.MOCK_MOVED ? { 'policy/1': [{ node: 'node-1', gpu_ids: [4, 5, 6, 7] }] } : undefined,
  // MOCK_BLOCKED=1 starts with the lease blocked, as after a failed transition, to try the Resolve control.
  blocked: process.env.MOCK_BLOCKED
    ? 'transition rollout -> score failed: engines did not report memory released'
    : undefined,
});
console.log(`mock gateway: ${gateway.url}/ (tRPC at ${gateway.url}/trpc)`);
const stop = () => void gateway.close().then(() => process.exit(0));
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
