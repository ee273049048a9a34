import type { ForwardRoute, ServingProxyOptions } from './route-types.ts';

/** The handler's options with a route owner's in place, made once per handler and owner (the root OpenAI routes
 * borrow a role's counter and hooks for every request they route there), not spread per request. */
const OWNED = new WeakMap<object, { base: ServingProxyOptions; merged: ServingProxyOptions }>();
export function ownedOptions(
  base: ServingProxyOptions,
  owner: NonNullable<ForwardRoute['owner']>,
): ServingProxyOptions {
  const made = OWNED.get(owner);
  if (made?.base === base) return made.merged;
  const merged = { ...base, ...owner };
  OWNED.set(owner, { base, merged });
  return merged;
}
