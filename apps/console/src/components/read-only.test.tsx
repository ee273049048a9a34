import { act, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type MockGateway, startMockGateway } from '../../testing/mock-gateway-server.ts';
import { providersFor, renderApp } from '../../testing/providers.tsx';
import { getAdminToken, getTokenPermission, setSessionToken } from '../api/admin-token.ts';
import { PhasesPage } from '../pages/phases-page.tsx';
import { ReplicasPage } from '../pages/replicas-page.tsx';
import { READ_ONLY_HINT } from './admin-actions.tsx';
import { TokenControl } from './token-control.tsx';

// The console against a gateway with a serving token (the mock serves the same contract over real HTTP): it asks
// for a token before showing anything, takes the serving token as a read-only sign-in, and sends no action then.
const ADMIN = 'admin-token-ro';
const SERVING = 'serving-token-ro';
const BLOCKED = 'transition rollout -> score failed: engines did not report memory released';
const ACTIONS = ['drain-model', 'activate-model', 'restart-replica', 'advance-phase', 'resolve-lease'];

/** Counts the EventSources the console opens and which are still open (the live stream). */
class FakeEventSource extends EventTarget {
  static instances: FakeEventSource[] = [];
  readonly CONNECTING = 0;
  readonly OPEN = 1;
  readonly CLOSED = 2;
  readyState = 0;
  constructor(readonly url: string) {
    super();
    FakeEventSource.instances.push(this);
  }
  close(): void {
    this.readyState = 2;
  }
}

let gateway: MockGateway;
let Providers: ReturnType<typeof providersFor>;
const originalEventSource = globalThis.EventSource;

beforeAll(async () => {
  gateway = await startMockGateway({ adminToken: ADMIN, servingToken: SERVING, blocked: BLOCKED });
  Providers = providersFor(`${gateway.url}/trpc`, getAdminToken);
  // The page runs on the gateway's origin, as when the gateway serves the console: no CORS preflight.
  (window as unknown as { happyDOM: { setURL(url: string): void } }).happyDOM.setURL(gateway.url);
});
afterAll(async () => {
  await gateway.close();
});
beforeEach(() => {
  FakeEventSource.instances = [];
  (globalThis as { EventSource: unknown }).EventSource = FakeEventSource;
});
afterEach(() => {
  act(() => setSessionToken(null));
  (globalThis as { EventSource: unknown }).EventSource = originalEventSource;
});

const renderConsole = () => renderApp(`${gateway.url}/trpc`, getAdminToken);

async function signIn(token: string) {
  fireEvent.change(screen.getByTestId('token-input'), { target: { value: token } });
  fireEvent.click(screen.getByTestId('token-submit'));
  await screen.findByTestId('token-status');
}

const policyState = () =>
  gateway.api
    .state()
    .replicas.filter((r) => r.model === 'policy')
    .map((r) => r.state);

describe('console with a serving token configured', { timeout: 20_000 }, () => {
  it('asks for a token instead of showing a broken page, then shows the state after a serving-token sign-in', async () => {
    globalThis.location.hash = '#/cluster';
    renderConsole();
    const banner = await screen.findByTestId('connection-banner');
    expect(banner.dataset.kind).toBe('needs-token');
    expect(banner.textContent).toContain('needs a token');
    expect(screen.getByTestId('connection').dataset.connection).toBe('locked');
    expect(screen.queryByTestId('loading')).toBeNull();
    expect(screen.queryByTestId('page-cluster')).toBeNull();
    // The live stream stays closed while refused (it would spend the failed-auth budget by reconnecting).
    await waitFor(() => expect(FakeEventSource.instances.every((es) => es.readyState === 2)).toBe(true));

    await signIn(SERVING);
    expect(getTokenPermission()).toBe('serving');
    expect(screen.getByTestId('token-status').textContent).toContain('read-only');
    expect(await screen.findByTestId('page-cluster')).toBeTruthy();
    expect(screen.queryByTestId('connection-banner')).toBeNull();
    // The stream reopens carrying the token in its connection params (EventSource sends no header).
    await waitFor(() => expect(FakeEventSource.instances.at(-1)?.readyState).toBe(0));
    const url = new URL(FakeEventSource.instances.at(-1)?.url ?? '');
    expect(JSON.parse(url.searchParams.get('connectionParams') ?? 'null')).toEqual({ token: SERVING });

    // Forgetting the token hides the state again and asks for one.
    fireEvent.click(screen.getByTestId('token-forget'));
    await waitFor(() => expect(screen.getByTestId('connection-banner').dataset.kind).toBe('needs-token'));
    expect(screen.queryByTestId('page-cluster')).toBeNull();
  });

  it('forgets a kept token the gateway now refuses (tokens changed since the sign-in) and asks again', async () => {
    globalThis.location.hash = '#/cluster';
    setSessionToken('serving-token-of-yesterday', 'serving');
    renderConsole();
    await waitFor(() => expect(getAdminToken()).toBeNull());
    expect((await screen.findByTestId('connection-banner')).dataset.kind).toBe('needs-token');
    expect(screen.getByTestId('token-input')).toBeTruthy();
    expect(screen.queryByTestId('page-cluster')).toBeNull();
  });

  it('refuses a wrong token at sign-in with a visible message, keeping nothing', async () => {
    render(<TokenControl />, { wrapper: Providers });
    fireEvent.change(screen.getByTestId('token-input'), { target: { value: 'not-a-token' } });
    fireEvent.click(screen.getByTestId('token-submit'));
    expect((await screen.findByTestId('token-error')).textContent).toBe('Refused: token refused');
    expect(getAdminToken()).toBeNull();
  });

  it('with the serving token: every action button is disabled with a hint, and no action is sent', async () => {
    render(
      <>
        <TokenControl />
        <ReplicasPage state={gateway.api.state()} />
        <PhasesPage state={gateway.api.state()} />
      </>,
      { wrapper: Providers },
    );
    await signIn(SERVING);
    for (const id of ACTIONS) {
      const buttons = screen.getAllByTestId(id) as HTMLButtonElement[];
      expect(buttons.length, id).toBeGreaterThan(0);
      for (const b of buttons) {
        expect(b.disabled, id).toBe(true);
        expect(b.title, id).toBe(READ_ONLY_HINT);
        fireEvent.click(b);
      }
    }
    expect(screen.queryByTestId('confirm-dialog')).toBeNull();
    expect(policyState()).toEqual(['ready', 'ready', 'ready', 'ready']);
    expect(gateway.api.state().activation_groups[0]?.blocked?.reason).toBe(BLOCKED);
    expect(gateway.api.state().events.some((e) => e.kind.startsWith('admin.'))).toBe(false);
  });

  it('with the admin token: the actions are offered as before and go through', async () => {
    render(
      <>
        <TokenControl />
        <ReplicasPage state={gateway.api.state()} />
      </>,
      { wrapper: Providers },
    );
    await signIn(ADMIN);
    expect(getTokenPermission()).toBe('admin');
    expect(screen.getByTestId('token-status').textContent).toContain('admin token set');
    const drain = screen.getAllByTestId('drain-model').find((b) => b.dataset.model === 'policy')!;
    expect((drain as HTMLButtonElement).disabled).toBe(false);
    expect(drain.title).toBe('');
    fireEvent.click(drain);
    fireEvent.click(screen.getByTestId('confirm-ok'));
    expect((await screen.findByTestId('action-result')).textContent).toContain('Drain rollout/policy');
    expect(policyState()).toEqual(['sleeping', 'sleeping', 'sleeping', 'sleeping']);
  });
});
