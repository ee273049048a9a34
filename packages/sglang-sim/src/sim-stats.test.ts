import { afterEach, describe, expect, it } from 'vitest';
import type { SimServer } from './server.ts';
import { get, post, sim } from './test-helpers.ts';

const servers: SimServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe('GET /sim/stats', () => {
  it('counts the generation requests the engine received', async () => {
    const s = await sim();
    servers.push(s);
    expect(((await get(s.url, '/sim/stats')).json as { requests: number }).requests).toBe(0);
    for (let i = 0; i < 3; i++)
      expect(
        (await post(s.url, '/generate', { text: 'hi', sampling_params: { max_new_tokens: 2 } })).status,
      ).toBe(200);
    const stats = (await get(s.url, '/sim/stats')).json as { requests: number; completed: number };
    expect([stats.requests, stats.completed]).toEqual([3, 3]);
  });
});
