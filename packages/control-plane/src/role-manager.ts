import type { InferenceManager } from '@uis/manager';
import { type Role, UisError } from '@uis/spec';

/** The manager of a role named by a caller (a path segment, a body field, a stored intent): 404 `unknown_role` at
 * `role` if the name is no role or the role is not configured. */
export function managerOfRole(managers: ReadonlyMap<Role, InferenceManager>, role: string): InferenceManager {
  const m = managers.get(role as Role);
  if (!m)
    throw new UisError({
      code: 'unknown_role',
      path: 'role',
      message: `role ${JSON.stringify(role)} is not configured; roles: ${[...managers.keys()].join(', ')}`,
    });
  return m;
}
