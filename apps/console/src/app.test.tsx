import { act, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { demoState } from '../testing/demo-state.ts';
import { renderApp } from '../testing/providers.tsx';
import { parseRoute } from './app.tsx';

/** Stands in for the browser's EventSource so the test drives the `changes` stream: connect, push states, drop. */
class FakeEventSource extends EventTarget {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSED = 2;
  readonly CONNECTING = 0;
  readonly OPEN = 1;
  readonly CLOSED = 2;
  static instances: FakeEventSource[] = [];
  readyState = 0;
  readonly url: string;
  constructor(url: string) {
    super();
    this.url = url;
    FakeEventSource.instances.push(this);
  }
  close(): void {
    this.readyState = 2;
  }
  emit(type: string, data?: unknown): void {
    if (type === 'connected') this.readyState = 1;
    if (type === 'error') this.readyState = 0;
    const event =
      data === undefined ? new Event(type) : new MessageEvent(type, { data: JSON.stringify(data) });
    act(() => {
      this.dispatchEvent(event);
    });
  }
}

const original = globalThis.EventSource;
beforeEach(() => {
  FakeEventSource.instances = [];
  (globalThis as { EventSource: unknown }).EventSource = FakeEventSource;
  globalThis.location.hash = '#/cluster';
});
afterEach(() => {
  (globalThis as { EventSource: unknown }).EventSource = original;
});

// Port 9 refuses connections: the `state` query fails, so everything on screen came through the stream.
const renderConsole = () => renderApp('http://127.0.0.1:9/trpc', () => null);

async function stream(): Promise<FakeEventSource> {
  await screen.findByTestId('connection');
  // vitest's condition wait: testing-library's flushes React's effects (act) as it resolves, and the test
  // then got a stream other than the one the console listens on.
  const es = await vi.waitFor(() => {
    const opened = FakeEventSource.instances.at(-1);
    if (!opened) throw new Error('the console did not open the changes stream');
    return opened;
  });
  expect(es.url).toContain('/trpc/changes');
  return es;
}

// Several waits of up to 10 s each (see testing/setup.ts): the 5 s default would cut them short.
describe('App: live data from the changes stream', { timeout: 30_000 }, () => {
  it('shows a loading state, then the pushed state, updates live, and says when the gateway is gone', async () => {
    renderConsole();
    expect(screen.getByTestId('loading').textContent).toMatch(/gateway/);
    const es = await stream();

    es.emit('connected', {});
    es.emit('message', demoState({ phase: 0 }));
    expect(await screen.findByTestId('page-cluster')).toBeTruthy();
    await waitFor(() => expect(screen.getByTestId('connection').dataset.connection).toBe('live'));
    expect(screen.getAllByTestId('gpu')).toHaveLength(16);
    expect(screen.getByTestId('cluster-current-phase').textContent).toBe('rollout');

    // A pushed state replaces the shown one: no polling, no refresh.
    es.emit('message', demoState({ phase: 1 }));
    await waitFor(() => expect(screen.getByTestId('cluster-current-phase').textContent).toBe('score'));

    // The stream drops: the last state stays, with a banner saying the console is retrying.
    es.emit('error');
    const banner = await screen.findByTestId('connection-banner');
    expect(banner.dataset.kind).toBe('reconnecting');
    expect(banner.textContent).toContain('Gateway unreachable, retrying');
    expect(screen.getByTestId('connection').dataset.connection).toBe('reconnecting');
    expect(screen.getByTestId('cluster-current-phase').textContent).toBe('score');

    es.emit('connected', {});
    es.emit('message', demoState({ phase: 2 }));
    await waitFor(() => expect(screen.getByTestId('cluster-current-phase').textContent).toBe('opd'));
    expect(screen.queryByTestId('connection-banner')).toBeNull();
  });

  it('refuses a state that does not match the schema, naming what is wrong', async () => {
    renderConsole();
    const es = await stream();
    es.emit('connected', {});
    es.emit('message', { ...demoState(), replicas: [{ engine_id: 7 }] });
    const banner = await screen.findByTestId('connection-banner');
    expect(banner.dataset.kind).toBe('invalid');
    expect(banner.textContent).toMatch(/replicas\[0\]/);
    expect(screen.queryByTestId('page-cluster')).toBeNull();
  });
});

describe('routes', () => {
  it('reads the page and the filter from the hash', () => {
    expect(parseRoute('#/replicas?q=math-teacher%2F0')).toEqual({
      route: 'replicas',
      query: 'math-teacher/0',
    });
    expect(parseRoute('#/phases')).toEqual({ route: 'phases', query: '' });
    expect(parseRoute('')).toEqual({ route: 'cluster', query: '' });
    expect(parseRoute('#/nope')).toEqual({ route: 'cluster', query: '' });
  });
});
