import { describe, expect, it } from 'vitest';
import { InFlightCounter } from './in-flight.ts';

describe('InFlightCounter', () => {
  it('counts per target and in total, lists only targets with requests in flight, refuses a release too many', () => {
    const c = new InFlightCounter();
    c.acquire('a');
    c.acquire('a');
    c.acquire('b');
    expect([c.get('a'), c.get('b'), c.get('none'), c.total]).toEqual([2, 1, 0, 3]);
    expect(c.snapshot()).toEqual({ a: 2, b: 1 });
    c.release('b');
    c.release('a');
    expect(c.snapshot()).toEqual({ a: 1 });
    expect(() => c.release('b')).toThrow(/release without acquire for target b/);
    c.release('a');
    expect([c.get('a'), c.total, c.snapshot()]).toEqual([0, 0, {}]);
    // A target counted again after it reached zero starts from one.
    c.acquire('a');
    expect(c.snapshot()).toEqual({ a: 1 });
  });
});
