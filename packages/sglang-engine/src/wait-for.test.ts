import { describe, expect, it } from 'vitest';
import { waitFor } from './wait-for.ts';

describe('waitFor', () => {
  it('resolves with the first value the check returns, sync or async', async () => {
    let n = 0;
    expect(await waitFor(() => (++n >= 3 ? n : false))).toBe(3);
    expect(await waitFor(async () => 'ready')).toBe('ready');
  });

  it('fails past its timeout, naming what it waited for', async () => {
    await expect(waitFor(() => false, 50, 'the engine to start')).rejects.toThrow(
      'timed out after 50 ms waiting for the engine to start',
    );
    await expect(waitFor(() => 0, 30)).rejects.toThrow(/waiting for \(\) => 0/);
  });
});
