// The free-port helpers live in sglang-engine beside the process launcher; re-exported for the manager's users.
export { freePort, freePorts } from '@uis/sglang-engine';
export * from './batch-runner.ts';
export * from './batch-store.ts';
export * from './deferred-scoring.ts';
export * from './event-log.ts';
export * from './in-flight.ts';
export * from './inference-manager.ts';
export * from './launchers.ts';
export * from './lifecycle-coordinator.ts';
export * from './operations.ts';
export * from './placement-groups.ts';
export * from './ray/index.ts';
export * from './registry.ts';
export * from './router/index.ts';
export * from './runtime.ts';
export * from './score-parsers.ts';
export * from './store.ts';
export * from './weight-update.ts';
