import { useSyncExternalStore } from 'react';

/** The admin token lives in sessionStorage: entered once per browser session, gone when the tab closes. */
const KEY = 'uis.adminToken';
const listeners = new Set<() => void>();

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

export function setAdminToken(token: string | null): void {
  const s = storage();
  if (token === null || token === '') s?.removeItem(KEY);
  else s?.setItem(KEY, token);
  for (const listener of listeners) listener();
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export function useAdminToken(): string | null {
  return useSyncExternalStore(subscribe, getAdminToken, () => null);
}
