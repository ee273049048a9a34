import { describe, expect, it } from 'vitest';
import { get, post, simsPerTest } from './testing.ts';

const { start } = simsPerTest();

describe('GET /sim/stats', () => {
  it('counts the generation requests the engine received', async () => {
    const s = await start();
    expect(((await get(s.url, '/sim/stats')).json as { requests: number }).requests).toBe(0);
    for (let i = 0; i < 3; i++)
      expect(
        (await post(s.url, '/generate', { text: 'hi', sampling_params: { max_new_tokens: 2 } })).status,
      ).toBe(200);
    const stats = (await get(s.url, '/sim/stats')).json as { requests: number; completed: number };
    expect([stats.requests, stats.completed]).toEqual([3, 3]);
  });
});
