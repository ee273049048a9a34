export * from './server-args.ts';
