import { useMutation } from '@tanstack/react-query';
import { createContext, type ReactNode, useCallback, useContext, useState } from 'react';
import { setAdminToken, useAdminToken } from '../api/admin-token.ts';
import { describeError, useTRPC } from '../api/trpc.ts';

/** Operator actions: every one asks for confirmation (and for the admin token when none is kept for this
 * session), then shows what the gateway answered. A refused token is forgotten so the next attempt asks again. */

export interface AdminAction {
  /** Short verb phrase shown on the dialog, e.g. `Drain rollout/policy`. */
  title: string;
  /** What will happen, in operator terms. */
  description: string;
  /** Runs the action and words its result for the operator. */
  run: () => Promise<string>;
}

interface Outcome {
  id: number;
  title: string;
  ok: boolean;
  message: string;
}

const ActionContext = createContext<(action: AdminAction) => void>(() => {});

export function useAdminAction(): (action: AdminAction) => void {
  return useContext(ActionContext);
}

let nextOutcome = 1;

export function AdminActionsProvider({ children }: { children: ReactNode }) {
  const token = useAdminToken();
  const [pending, setPending] = useState<AdminAction | null>(null);
  const [draftToken, setDraftToken] = useState('');
  const [outcomes, setOutcomes] = useState<Outcome[]>([]);
  const mutation = useMutation({
    mutationFn: (action: AdminAction) => action.run(),
  });

  const report = useCallback((o: Omit<Outcome, 'id'>) => {
    setOutcomes((prev) => [{ ...o, id: nextOutcome++ }, ...prev].slice(0, 4));
  }, []);

  const confirm = async () => {
    const action = pending;
    if (!action) return;
    if (!token) {
      if (draftToken.trim() === '') return;
      setAdminToken(draftToken.trim());
    }
    setPending(null);
    setDraftToken('');
    try {
      const message = await mutation.mutateAsync(action);
      report({ title: action.title, ok: true, message });
    } catch (e) {
      const { message, unauthorized } = describeError(e);
      if (unauthorized) setAdminToken(null);
      report({ title: action.title, ok: false, message });
    }
  };

  return (
    <ActionContext.Provider value={setPending}>
      {children}
      {pending && (
        <div className="modal-backdrop">
          <div
            className="modal"
            role="dialog"
            aria-modal="true"
            aria-label={pending.title}
            data-testid="confirm-dialog"
          >
            <h2>{pending.title}?</h2>
            <p>{pending.description}</p>
            {!token && (
              <label className="field">
                Admin token (kept for this browser session)
                <input
                  type="password"
                  autoComplete="off"
                  value={draftToken}
                  onChange={(e) => setDraftToken(e.target.value)}
                  data-testid="confirm-token"
                />
              </label>
            )}
            <div className="modal-buttons">
              <button type="button" onClick={() => setPending(null)} data-testid="confirm-cancel">
                Cancel
              </button>
              <button
                type="button"
                className="danger"
                onClick={() => void confirm()}
                disabled={!token && draftToken.trim() === ''}
                data-testid="confirm-ok"
              >
                {pending.title}
              </button>
            </div>
          </div>
        </div>
      )}
      <div className="toasts" aria-live="polite">
        {mutation.isPending && <div className="toast toast-pending">Working…</div>}
        {outcomes.map((o) => (
          <div
            key={o.id}
            className={`toast ${o.ok ? 'toast-ok' : 'toast-error'}`}
            data-testid={o.ok ? 'action-result' : 'action-error'}
            role={o.ok ? 'status' : 'alert'}
          >
            <strong>{o.title}:</strong> {o.message}
            <button
              type="button"
              className="toast-close"
              aria-label="dismiss"
              onClick={() => setOutcomes((prev) => prev.filter((x) => x.id !== o.id))}
            >
              ×
            </button>
          </div>
        ))}
      </div>
    </ActionContext.Provider>
  );
}

/** Sign in with the admin token once per session; a wrong token is refused with a visible message. */
export function TokenControl() {
  const trpc = useTRPC();
  const token = useAdminToken();
  const [draft, setDraft] = useState('');
  const [refusal, setRefusal] = useState<string | null>(null);
  const check = useMutation(trpc.checkToken.mutationOptions());

  if (token) {
    return (
      <div className="token" data-testid="token-status">
        <span className="mark-yes">admin token set</span>
        <button type="button" onClick={() => setAdminToken(null)} data-testid="token-forget">
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
      await check.mutateAsync({ token: value });
      setAdminToken(value);
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
        placeholder="admin token"
        aria-label="admin token"
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
