export * from './confirming-registrar.ts';
export * from './model-routers.ts';
export * from './sglang-router-process.ts';
