import { useMutation } from '@tanstack/react-query';
import { createContext, type ReactNode, useCallback, useContext, useState } from 'react';
import { setAdminToken, useAdminToken, useTokenPermission } from '../api/admin-token.ts';
import { describeError } from '../api/trpc.ts';

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

/** Shown on every action button while the console is signed in with the serving token. */
export const READ_ONLY_HINT = 'needs the admin token';

/** Signed in with the serving token: the console shows everything and acts on nothing (the gateway would answer
 * 403). Without a token the actions stay offered: their dialog asks for the admin token. */
export function useReadOnly(): boolean {
  return useTokenPermission() === 'serving';
}

/** The props an action button adds while read-only: disabled, with the hint as its title. */
export function readOnlyProps(readOnly: boolean): {
  disabled?: true;
  title?: string;
  'data-readonly'?: 'true';
} {
  return readOnly ? { disabled: true, title: READ_ONLY_HINT, 'data-readonly': 'true' } : {};
}

let nextOutcome = 1;
// Read-only: an action asked for anyway (a button enabled by mistake) opens no dialog and sends nothing.
const ignore = () => {};

export function AdminActionsProvider({ children }: { children: ReactNode }) {
  const token = useAdminToken();
  const readOnly = useReadOnly();
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
    <ActionContext.Provider value={readOnly ? ignore : setPending}>
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
