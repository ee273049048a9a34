import type { MemoryTag, PauseMode } from '@uis/sglang-engine';

/** What the simulated engine reports of itself (`SimServer.state()`, `stats()`). */

export type EngineStatus = 'starting' | 'ready' | 'unhealthy' | 'hung' | 'crashed' | 'closed';
export type MemoryState = 'resident' | 'releasing' | 'released';

export interface SimStats {
  requests: number;
  completed: number;
  aborted: number;
  errors: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  running: number;
  waiting: number;
  steps: number;
  kvTokensUsed: number;
}

export interface SimState {
  status: EngineStatus;
  paused: PauseMode | null;
  memory: Record<MemoryTag, MemoryState>;
  weightVersion: string;
  modelPath: string;
  /** Changes with every weight update; outputs are a function of it. */
  weightsFingerprint: number;
  /** false after weights were released without --enable-weights-cpu-backup and resumed: garbage until updated. */
  weightsValid: boolean;
  weightUpdateGroups: string[];
  connectedNodes: number;
}
