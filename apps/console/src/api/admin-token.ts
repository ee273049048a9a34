import { useSyncExternalStore } from 'react';

/** The console's token lives in sessionStorage: entered once per browser session, gone when the tab closes. It is
 * the admin token (every action) or the serving token (reads only: the console is read-only), as the gateway's
 * `checkToken` answered at sign-in. A token kept without a permission is the admin token (the action dialog). */
const KEY = 'uis.adminToken';
const PERMISSION_KEY = 'uis.tokenPermission';
const listeners = new Set<() => void>();

export type TokenPermission = 'admin' | 'serving';

function storage(): Storage | null {
  try {
    return globalThis.sessionStorage ?? null;
  } catch {
    return null;
  }
}

export function getAdminToken(): string | null {
  return storage()?.getItem(KEY) ?? null;
}

/** What the kept token grants, or null without one. */
export function getTokenPermission(): TokenPermission | null {
  if (getAdminToken() === null) return null;
  return storage()?.getItem(PERMISSION_KEY) === 'serving' ? 'serving' : 'admin';
}

/** Keeps `token` for this session with what it grants (forgets it on null or ''). */
export function setSessionToken(token: string | null, permission: TokenPermission = 'admin'): void {
  const s = storage();
  if (token === null || token === '') {
    s?.removeItem(KEY);
    s?.removeItem(PERMISSION_KEY);
  } else {
    s?.setItem(KEY, token);
    s?.setItem(PERMISSION_KEY, permission);
  }
  for (const listener of listeners) listener();
}

export function setAdminToken(token: string | null): void {
  setSessionToken(token, 'admin');
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function useAdminToken(): string | null {
  return useSyncExternalStore(subscribe, getAdminToken, () => null);
}

export function useTokenPermission(): TokenPermission | null {
  return useSyncExternalStore(subscribe, getTokenPermission, () => null);
}
