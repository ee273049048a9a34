import { describe, expect, it } from 'vitest';
import { allowedMethods } from './unmatched.ts';

const routes = [
  { method: 'POST', path: '/rollout/generate' },
  { method: 'GET', path: '/rollout/engines' },
  { method: 'GET', path: '/roles/:role' },
  { method: 'POST', path: '/roles/:role/drain' },
  { method: 'ALL', path: '/roles/:role/drain' },
  { method: 'ALL', path: '*' },
  { method: 'GET', path: '/trpc/*' },
];

describe('allowedMethods', () => {
  it.each([
    ['/rollout/generate', ['POST']],
    ['/rollout/engines', ['GET', 'HEAD']],
    ['/roles/rollout', ['GET', 'HEAD']],
    ['/roles/rollout/drain', ['POST']],
    ['/roles/rollout/drain/', ['POST']],
    ['/roles/a/b/drain', []],
    ['/trpc/state', []],
    ['/nope', []],
  ])('%s -> %j', (path, allow) => {
    expect(allowedMethods(path, routes)).toEqual(allow);
  });
});
