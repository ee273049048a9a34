export { renderChatTemplate } from './chat.ts';
export type { EngineStatus, MemoryState, SimState, SimStats } from './engine.ts';
export { PROCESS_GPUS, type SimGpuLedger } from './gpu-memory.ts';
export { parseSimArgs, type SimOptions, type SimOptionsInput, SimOptionsSchema } from './options.ts';
export { type SimServer, type SimServerHooks, startSimServer } from './server.ts';
export { decode, EOS_ID, encode, tokenText, VOCAB_SIZE, WORDS } from './tokenizer.ts';
