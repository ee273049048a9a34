import { lazy, type ReactNode, Suspense, useState, useSyncExternalStore } from 'react';
import { AdminActionsProvider } from './components/admin-actions.tsx';
import { TokenControl } from './components/token-control.tsx';
import { formatClock } from './lib/format.ts';
import { BatchesPage } from './pages/batches-page.tsx';
import { ClusterPage } from './pages/cluster-page.tsx';
import { EventsPage } from './pages/events-page.tsx';
import { PhasesPage } from './pages/phases-page.tsx';
import { ReplicasPage } from './pages/replicas-page.tsx';
import { type ConsoleStateResult, useConsoleState } from './state/use-console-state.ts';

// The planner and the YAML parser load only when the Plan page is opened.
const PlanPage = lazy(() => import('./pages/plan-page.tsx').then((m) => ({ default: m.PlanPage })));
// The chart library loads only with the pages that draw charts.
const TimeSeriesPage = lazy(() =>
  import('./observability/time-series-page.tsx').then((m) => ({ default: m.TimeSeriesPage })),
);
const GpuTimePage = lazy(() =>
  import('./observability/gpu-time-page.tsx').then((m) => ({ default: m.GpuTimePage })),
);

export const ROUTES = [
  { id: 'cluster', label: 'Cluster' },
  { id: 'phases', label: 'Phases' },
  { id: 'replicas', label: 'Replicas' },
  { id: 'batches', label: 'Deferred batches' },
  { id: 'timeseries', label: 'Time series' },
  { id: 'gputime', label: 'GPU time' },
  { id: 'plan', label: 'Plan' },
  { id: 'events', label: 'Events' },
] as const;
export type RouteId = (typeof ROUTES)[number]['id'];

/** `#/<page>?q=<filter>`: the page, and the filter a link asked for (e.g. a grid block -> its replica row). */
function currentHash(): string {
  return globalThis.location?.hash ?? '';
}

export function parseRoute(hash: string): { route: RouteId; query: string } {
  const [path = '', search = ''] = hash.replace(/^#\/?/, '').split('?');
  return {
    route: ROUTES.find((r) => r.id === path)?.id ?? 'cluster',
    query: new URLSearchParams(search).get('q') ?? '',
  };
}

function subscribeHash(listener: () => void): () => void {
  globalThis.addEventListener('hashchange', listener);
  return () => globalThis.removeEventListener('hashchange', listener);
}

export function useRoute(): { route: RouteId; query: string } {
  return parseRoute(useSyncExternalStore(subscribeHash, currentHash, () => ''));
}

const CONNECTION_TEXT: Record<ConsoleStateResult['connection'], string> = {
  connecting: 'connecting',
  live: 'live',
  reconnecting: 'reconnecting',
  failed: 'disconnected',
  locked: 'needs a token',
};

function ConnectionBanner({ live }: { live: ConsoleStateResult }) {
  if (live.needsToken) {
    return (
      <div className="alert alert-warn" role="alert" data-testid="connection-banner" data-kind="needs-token">
        <strong>This gateway needs a token to show its state.</strong> Sign in (top right) with the serving
        token to watch, or with the admin token to act as well.
      </div>
    );
  }
  if (live.invalid) {
    return (
      <div className="alert alert-error" role="alert" data-testid="connection-banner" data-kind="invalid">
        The gateway sent a state this console cannot read (version mismatch?): {live.invalid}
      </div>
    );
  }
  if (live.connection === 'reconnecting') {
    return (
      <div
        className="alert alert-warn"
        role="status"
        data-testid="connection-banner"
        data-kind="reconnecting"
      >
        <strong>Gateway unreachable, retrying…</strong>
        {live.state ? ` Showing the last state received at ${formatClock(live.state.generated_at)} UTC.` : ''}
        {live.error && live.error !== 'Unknown error' ? <span className="muted"> ({live.error})</span> : null}
      </div>
    );
  }
  if (live.connection === 'failed') {
    return (
      <div className="alert alert-error" role="alert" data-testid="connection-banner" data-kind="failed">
        <strong>Lost the gateway:</strong> {live.error}{' '}
        <button type="button" onClick={live.retry}>
          Reconnect
        </button>
      </div>
    );
  }
  return null;
}

function NeedsState({
  live,
  children,
}: {
  live: ConsoleStateResult;
  children: (s: NonNullable<ConsoleStateResult['state']>) => ReactNode;
}) {
  if (live.state) return <>{children(live.state)}</>;
  if (live.invalid || live.needsToken) return null;
  return (
    <div className="placeholder" data-testid="loading">
      <div className="spinner" aria-hidden="true" />
      {live.connection === 'connecting' ? 'Connecting to the gateway…' : 'Waiting for the gateway to answer…'}
    </div>
  );
}

export function App() {
  const { route, query } = useRoute();
  const live = useConsoleState();
  const [planText, setPlanText] = useState('');
  const title = ROUTES.find((r) => r.id === route)?.label ?? '';
  return (
    <AdminActionsProvider>
      <div className="app">
        <nav className="nav" aria-label="pages">
          <div className="brand">
            UIS <span className="muted">console</span>
          </div>
          <ul>
            {ROUTES.map((r) => (
              <li key={r.id}>
                <a
                  href={`#/${r.id}`}
                  className={r.id === route ? 'active' : undefined}
                  aria-current={r.id === route ? 'page' : undefined}
                  data-testid={`nav-${r.id}`}
                >
                  {r.label}
                </a>
              </li>
            ))}
          </ul>
          <div
            className={`conn conn-${live.connection}`}
            data-testid="connection"
            data-connection={live.connection}
          >
            <span className="conn-dot" /> {CONNECTION_TEXT[live.connection]}
          </div>
        </nav>
        <main className="main">
          <header className="topbar">
            <h1>{title}</h1>
            {live.state && route !== 'plan' && (
              <span className="muted" data-testid="generated-at">
                state of {formatClock(live.state.generated_at)} UTC
              </span>
            )}
            <div className="spacer" />
            <TokenControl />
          </header>
          <ConnectionBanner live={live} />
          {route === 'timeseries' || route === 'gputime' ? (
            <Suspense
              fallback={
                <div className="placeholder" data-testid="loading">
                  <div className="spinner" aria-hidden="true" />
                  Loading the charts…
                </div>
              }
            >
              {route === 'timeseries' ? <TimeSeriesPage /> : <GpuTimePage />}
            </Suspense>
          ) : route === 'plan' ? (
            <Suspense
              fallback={
                <div className="placeholder" data-testid="loading">
                  <div className="spinner" aria-hidden="true" />
                  Loading the planner…
                </div>
              }
            >
              <PlanPage initialText={planText} onChange={setPlanText} />
            </Suspense>
          ) : (
            <NeedsState live={live}>
              {(state) => {
                switch (route) {
                  case 'phases':
                    return <PhasesPage state={state} />;
                  case 'replicas':
                    return <ReplicasPage key={query} state={state} initialFilter={query} />;
                  case 'batches':
                    return <BatchesPage state={state} />;
                  case 'events':
                    return <EventsPage state={state} />;
                  default:
                    return <ClusterPage state={state} />;
                }
              }}
            </NeedsState>
          )}
        </main>
      </div>
    </AdminActionsProvider>
  );
}
