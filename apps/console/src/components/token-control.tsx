import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { setSessionToken, useAdminToken, useTokenPermission } from '../api/admin-token.ts';
import { describeError, useTRPC } from '../api/trpc.ts';
import { READ_ONLY_HINT } from './admin-actions.tsx';

/** Sign in once per session with the admin token (every action) or the serving token (reads only: the console
 * turns read-only); the gateway's `checkToken` says which one it is. A wrong token is refused with a visible
 * message. */
export function TokenControl() {
  const trpc = useTRPC();
  const token = useAdminToken();
  const permission = useTokenPermission();
  const [draft, setDraft] = useState('');
  const [refusal, setRefusal] = useState<string | null>(null);
  const check = useMutation(trpc.checkToken.mutationOptions());

  if (token) {
    return (
      <div className="token" data-testid="token-status" data-permission={permission ?? 'admin'}>
        {permission === 'serving' ? (
          <span className="mark-yes" title={`actions ${READ_ONLY_HINT}`}>
            serving token set (read-only)
          </span>
        ) : (
          <span className="mark-yes">admin token set</span>
        )}
        <button type="button" onClick={() => setSessionToken(null)} data-testid="token-forget">
          Forget
        </button>
      </div>
    );
  }
  const submit = async () => {
    const value = draft.trim();
    if (value === '') return;
    setRefusal(null);
    try {
      const answer = await check.mutateAsync({ token: value });
      setSessionToken(value, answer.permission);
      setDraft('');
    } catch (e) {
      setRefusal(describeError(e).message);
    }
  };
  return (
    <form
      className="token"
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <input
        type="password"
        placeholder="admin or serving token"
        aria-label="admin or serving token"
        autoComplete="off"
        value={draft}
        onChange={(e) => setDraft(e.target.value)}
        data-testid="token-input"
      />
      <button type="submit" disabled={check.isPending} data-testid="token-submit">
        Sign in
      </button>
      {refusal && (
        <span className="error-text" role="alert" data-testid="token-error">
          {refusal}
        </span>
      )}
    </form>
  );
}
