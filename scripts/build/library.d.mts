import type { UserConfig } from 'tsdown';

export function libraryConfig(options: UserConfig & { entry: Record<string, string> }): UserConfig;
