export { sseData } from '@uis/spec';
export * from './client.ts';
export * from './engine.ts';
export * from './engine-error.ts';
export * from './launcher.ts';
export * from './ports.ts';
export * from './protocol.ts';
export * from './router-client.ts';
export * from './server-args.ts';
