export * from './body.ts';
export * from './errors.ts';
export * from './fast-routes.ts';
export * from './forward.ts';
export * from './headers.ts';
export * from './in-flight.ts';
export * from './upstream-pools.ts';
