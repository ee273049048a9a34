import { UisError } from '@uis/spec';

/** A route as a router lists it: a method and a path with `:param` segments. */
export interface RouteEntry {
  method: string;
  path: string;
}

/**
 * The methods the routes take at `path` (exact paths and `:param` patterns; catch-alls and middleware aside), with
 * HEAD wherever GET is (the framework answers it). The one source of every 405's `Allow`: a request whose path is a
 * route's under another method is that route's 405, not a 404 that hides it.
 */
export function allowedMethods(path: string, routes: readonly RouteEntry[]): string[] {
  const out = new Set<string>();
  for (const r of routes) {
    if (r.method === 'ALL' || r.path.includes('*')) continue;
    if (r.path === path || (r.path.includes(':') && patternOf(r.path).test(path))) out.add(r.method);
  }
  if (out.has('GET')) out.add('HEAD');
  return [...out];
}

export function methodNotAllowed(method: string, path: string, allow: readonly string[]): UisError {
  return new UisError({
    code: 'method_not_allowed',
    path: 'method',
    message: `${method} ${path} is not supported; use ${allow.join(', ')}`,
  });
}

const patterns = new Map<string, RegExp>();

/** `/roles/:role/drain` -> a RegExp matching the concrete paths of that route. */
function patternOf(path: string): RegExp {
  let re = patterns.get(path);
  if (re === undefined) {
    const parts = path
      .split('/')
      .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    re = new RegExp(`^${parts.join('/')}/?$`);
    patterns.set(path, re);
  }
  return re;
}
