import { fireEvent, render, screen } from '@testing-library/react';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { demoState } from '../../testing/demo-state.ts';
import { type MockGateway, startMockGateway } from '../../testing/mock-gateway-server.ts';
import { providersFor } from '../../testing/providers.tsx';
import { getAdminToken, setAdminToken } from '../api/admin-token.ts';
import { PhasesPage } from './phases-page.tsx';

const TOKEN = 'phases-token';
const REASON = 'transition rollout -> score failed: engines did not report memory released';
let gateway: MockGateway;
let Providers: ReturnType<typeof providersFor>;

beforeAll(async () => {
  gateway = await startMockGateway({ adminToken: TOKEN, blocked: REASON });
  Providers = providersFor(`${gateway.url}/trpc`, getAdminToken);
  // The page runs on the gateway's origin, as when the gateway serves the console: no CORS preflight.
  (window as unknown as { happyDOM: { setURL(url: string): void } }).happyDOM.setURL(gateway.url);
});
afterAll(async () => {
  await gateway.close();
});
afterEach(() => setAdminToken(null));

describe('Phases page', { timeout: 15_000 }, () => {
  it('offers to resolve the lease only while it is blocked, at its phase by default', () => {
    const { unmount } = render(<PhasesPage state={demoState({ phase: 1 })} />, { wrapper: Providers });
    expect(screen.getByTestId('advance-phase')).toBeTruthy();
    expect(screen.queryByTestId('resolve-lease')).toBeNull();
    expect(screen.queryByTestId('resolve-phase')).toBeNull();
    unmount();

    render(<PhasesPage state={demoState({ phase: 1, blocked: REASON })} />, { wrapper: Providers });
    expect(screen.getByTestId('advance-phase')).toBeTruthy();
    const phase = screen.getByTestId('resolve-phase') as HTMLSelectElement;
    expect(phase.value).toBe('score');
    expect([...phase.options].map((o) => o.value)).toEqual(['rollout', 'score', 'opd', 'train']);
    expect((screen.getByTestId('resolve-note') as HTMLInputElement).value).toBe('');
  });

  it('asks for confirmation and the token, saying what resolving does; cancelling changes nothing', () => {
    render(<PhasesPage state={gateway.api.state()} />, { wrapper: Providers });
    fireEvent.click(screen.getByTestId('resolve-lease'));
    const dialog = screen.getByTestId('confirm-dialog');
    expect(dialog.textContent).toContain('Resolve the lease of actor at rollout');
    expect(dialog.textContent).toContain(REASON);
    // Resolving moves the engines: it is not an attestation that they are already there.
    expect(dialog.textContent).toContain('brings the GPUs of actor to phase rollout');
    expect(dialog.textContent).toContain('must report its memory released, then rollout onloads');
    expect(dialog.textContent).toContain('held at rollout once the engines are there');
    expect(dialog.textContent).toContain('the lease stays blocked and the answer names it');
    const ok = screen.getByTestId('confirm-ok') as HTMLButtonElement;
    expect(ok.disabled).toBe(true);
    fireEvent.click(screen.getByTestId('confirm-cancel'));
    expect(screen.queryByTestId('confirm-dialog')).toBeNull();
    expect(gateway.api.state().activation_groups[0]?.blocked?.reason).toBe(REASON);
  });

  it('resolves the lease at the chosen phase with the note once confirmed', async () => {
    render(<PhasesPage state={gateway.api.state()} />, { wrapper: Providers });
    fireEvent.change(screen.getByTestId('resolve-phase'), { target: { value: 'opd' } });
    fireEvent.change(screen.getByTestId('resolve-note'), {
      target: { value: 'nvidia-smi: only the teacher' },
    });
    fireEvent.click(screen.getByTestId('resolve-lease'));
    expect(screen.getByTestId('confirm-dialog').textContent).toContain('at opd');
    fireEvent.change(screen.getByTestId('confirm-token'), { target: { value: TOKEN } });
    fireEvent.click(screen.getByTestId('confirm-ok'));
    expect((await screen.findByTestId('action-result')).textContent).toContain(
      'actor: lease resolved at opd',
    );
    const group = gateway.api.state().activation_groups[0];
    expect(group?.blocked).toBeNull();
    expect(group?.current_phase).toBe('opd');
    expect(gateway.api.state().events.at(-1)).toMatchObject({
      kind: 'lease.resolved',
      actor: 'console',
      message: 'resolved at opd: nvidia-smi: only the teacher',
    });
  });
});
