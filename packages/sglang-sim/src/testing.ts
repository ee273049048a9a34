import { sseData } from '@uis/sglang-engine';
import { afterEach } from 'vitest';
import type { SimOptionsInput } from './options.ts';
import { type SimServer, startSimServer } from './server.ts';

/** Starts an in-process simulator on 127.0.0.1:0 and waits until it is healthy. */
export async function sim(options: SimOptionsInput = {}): Promise<SimServer> {
  const s = await startSimServer({ host: '127.0.0.1', port: 0, ...options });
  await s.ready;
  return s;
}

/** The simulators of one test file: `start` launches one and waits until it is healthy, `track` adopts one
 * started another way; every one of them is closed after each test. */
export function simsPerTest(): {
  start: (options?: SimOptionsInput) => Promise<SimServer>;
  track: (s: SimServer) => SimServer;
} {
  const servers: SimServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });
  const track = (s: SimServer) => {
    servers.push(s);
    return s;
  };
  return { start: async (options = {}) => track(await sim(options)), track };
}

/** A body as text and, when it is JSON, parsed. */
async function read(res: Response): Promise<{ text: string; json: unknown }> {
  const text = await res.text();
  try {
    return { text, json: JSON.parse(text) };
  } catch {
    return { text, json: undefined };
  }
}

export async function post(
  base: string,
  path: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<{ status: number; text: string; json: unknown; headers: Headers }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  return { status: res.status, ...(await read(res)), headers: res.headers };
}

export async function get(base: string, path: string, signal?: AbortSignal) {
  const res = await fetch(`${base}${path}`, { signal });
  return { status: res.status, ...(await read(res)) };
}

/** Reads an SSE body into its `data:` payloads (the final `[DONE]` included as a string). */
export async function sse(
  base: string,
  path: string,
  body: unknown,
): Promise<{ status: number; events: unknown[] }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const events: unknown[] = [];
  for await (const d of sseData(res.body ?? new ReadableStream<Uint8Array>())) {
    events.push(d === '[DONE]' ? d : JSON.parse(d));
  }
  return { status: res.status, events };
}
