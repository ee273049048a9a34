export * from './bridge-protocol.ts';
export * from './ray-bridge.ts';
export * from './ray-head.ts';
export * from './ray-launcher.ts';
export * from './ray-placement-groups.ts';
export * from './ray-runtime.ts';
