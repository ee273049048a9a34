export * from './config.ts';
export * from './console.ts';
export * from './discovery.ts';
export * from './errors.ts';
export * from './legacy.ts';
export * from './model.ts';
export * from './plan.ts';
export * from './states.ts';
