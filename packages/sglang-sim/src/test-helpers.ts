import type { SimOptionsInput } from './options.ts';
import { type SimServer, startSimServer } from './server.ts';

/** Starts an in-process simulator on 127.0.0.1:0 and waits until it is healthy. */
export async function sim(options: SimOptionsInput = {}): Promise<SimServer> {
  const s = await startSimServer({ host: '127.0.0.1', port: 0, ...options });
  await s.ready;
  return s;
}

export async function post(base: string, path: string, body?: unknown, signal?: AbortSignal) {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, headers: res.headers };
}

export async function get(base: string, path: string, signal?: AbortSignal) {
  const res = await fetch(`${base}${path}`, { signal });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
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
  const text = await res.text();
  const events = text
    .split('\n\n')
    .filter((b) => b.startsWith('data: '))
    .map((b) => {
      const d = b.slice(6);
      return d === '[DONE]' ? d : JSON.parse(d);
    });
  return { status: res.status, events };
}

export const waitFor = async (cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};
