import { describe, expect, it } from 'vitest';
import { ReplicaTargets } from './replica-targets.ts';

describe('ReplicaTargets', () => {
  it('gives a replica the same target while its URL, version and in-place counts stay, a new one when any moves', () => {
    const t = new ReplicaTargets();
    const a = t.engine('m/0', 'http://127.0.0.1:9000/x', 'v1', 0, 0);
    expect(a).toEqual({
      id: 'm/0',
      origin: 'http://127.0.0.1:9000',
      weightVersion: 'v1',
      inPlaceSwitches: 0,
      inPlaceResumes: 0,
    });
    expect(t.engine('m/0', 'http://127.0.0.1:9000/x', 'v1', 0, 0)).toBe(a);
    const moved = [
      t.engine('m/0', 'http://127.0.0.1:9001/x', 'v1', 0, 0),
      t.engine('m/0', 'http://127.0.0.1:9001/x', 'v2', 0, 0),
      t.engine('m/0', 'http://127.0.0.1:9001/x', 'v2', 1, 0),
      t.engine('m/0', 'http://127.0.0.1:9001/x', 'v2', 1, 1),
    ];
    expect(moved.map((m) => [m.origin, m.weightVersion, m.inPlaceSwitches, m.inPlaceResumes])).toEqual([
      ['http://127.0.0.1:9001', 'v1', 0, 0],
      ['http://127.0.0.1:9001', 'v2', 0, 0],
      ['http://127.0.0.1:9001', 'v2', 1, 0],
      ['http://127.0.0.1:9001', 'v2', 1, 1],
    ]);
    expect(new Set([a, ...moved]).size).toBe(5);
    // Another replica never gets this one's target.
    expect(t.engine('m/1', 'http://127.0.0.1:9001/x', 'v2', 1, 1).id).toBe('m/1');
  });

  it("names a model's router target after the model, made again when its URL or version moves", () => {
    const t = new ReplicaTargets();
    const r = t.router('m', 'http://127.0.0.1:8000', null);
    expect(r).toEqual({ id: 'router:m', origin: 'http://127.0.0.1:8000', weightVersion: null });
    expect(t.router('m', 'http://127.0.0.1:8000', null)).toBe(r);
    expect(t.router('m', 'http://127.0.0.1:8000', 'v3').weightVersion).toBe('v3');
    expect(t.router('m', 'http://127.0.0.1:8001', 'v3').origin).toBe('http://127.0.0.1:8001');
    expect(t.router('other', 'http://127.0.0.1:8001', 'v3').id).toBe('router:other');
  });
});
