import { fireEvent, render, screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { demoState } from '../../testing/demo-state.ts';
import { providersFor } from '../../testing/providers.tsx';
import { ReplicasPage } from './replicas-page.tsx';

// Never called by these tests: nothing is confirmed.
const Providers = providersFor('http://127.0.0.1:9/trpc', () => null);

const engines = () => screen.getAllByTestId('replica-row').map((r) => r.dataset.engineId);

describe('Replicas page', () => {
  it('groups replicas by role and model with the topology revision of each role', () => {
    render(<ReplicasPage state={demoState({ phase: 1 })} />, { wrapper: Providers });
    const roles = screen.getAllByTestId('role-section');
    expect(roles.map((r) => r.dataset.role)).toEqual(['rollout', 'genrm', 'teacher']);
    expect(within(roles[0]!).getByTestId('topology-revision').textContent).toBe('11');
    expect(engines()).toEqual([
      'policy/0',
      'policy/1',
      'policy/2',
      'policy/3',
      'judge/0',
      'judge/1',
      'math-teacher/0',
    ]);
    const judge = screen.getAllByTestId('replica-row').find((r) => r.dataset.engineId === 'judge/0')!;
    expect(judge.dataset.state).toBe('ready');
    expect(judge.dataset.directEligible).toBe('true');
    expect(within(judge).getByTestId('health-sparkline')).toBeTruthy();
  });

  it('filters by text and by state', () => {
    render(<ReplicasPage state={demoState({ phase: 1 })} />, { wrapper: Providers });
    fireEvent.change(screen.getByTestId('replica-filter'), { target: { value: 'judge' } });
    expect(engines()).toEqual(['judge/0', 'judge/1']);
    fireEvent.change(screen.getByTestId('replica-filter'), { target: { value: '' } });
    fireEvent.change(screen.getByTestId('replica-state-filter'), { target: { value: 'sleeping' } });
    expect(engines()).toEqual(['policy/0', 'policy/1', 'policy/2', 'policy/3', 'math-teacher/0']);
    expect(screen.getAllByText('No replica matches the filter.')).toHaveLength(1);
  });

  it('shows the SGLang release each engine reports', () => {
    render(<ReplicasPage state={demoState({ phase: 0 })} />, { wrapper: Providers });
    const section = screen.getAllByTestId('model-section').find((s) => s.dataset.model === 'policy')!;
    const cells = within(section).getAllByTestId('replica-sglang');
    expect(cells.length).toBeGreaterThan(0);
    expect(cells.map((c) => c.textContent)).toEqual(cells.map(() => '0.5.17'));
  });

  it('sorts by in-flight load, then the other way round', () => {
    render(<ReplicasPage state={demoState({ phase: 0 })} />, { wrapper: Providers });
    const section = screen.getAllByTestId('model-section').find((s) => s.dataset.model === 'policy')!;
    const inflight = () =>
      within(section)
        .getAllByTestId('replica-row')
        .map((r) => Number(r.querySelectorAll('td')[6]?.textContent));
    fireEvent.click(within(section).getByTestId('sort-inflight'));
    const asc = inflight();
    expect(asc).toEqual([...asc].sort((a, b) => a - b));
    expect(new Set(asc).size).toBeGreaterThan(1);
    fireEvent.click(within(section).getByTestId('sort-inflight'));
    expect(inflight()).toEqual([...asc].reverse());
  });

  it('asks for confirmation and the admin token before draining', () => {
    render(<ReplicasPage state={demoState()} />, { wrapper: Providers });
    const section = screen.getAllByTestId('model-section').find((s) => s.dataset.model === 'policy')!;
    fireEvent.click(within(section).getByTestId('drain-model'));
    const dialog = screen.getByTestId('confirm-dialog');
    expect(dialog.textContent).toContain('Drain rollout/policy');
    const ok = screen.getByTestId('confirm-ok') as HTMLButtonElement;
    expect(ok.disabled).toBe(true);
    fireEvent.change(screen.getByTestId('confirm-token'), { target: { value: 'x' } });
    expect(ok.disabled).toBe(false);
    fireEvent.click(screen.getByTestId('confirm-cancel'));
    expect(screen.queryByTestId('confirm-dialog')).toBeNull();
  });

  it('starts filtered when a link asked for one replica', () => {
    render(<ReplicasPage state={demoState()} initialFilter="judge/1" />, { wrapper: Providers });
    expect(engines()).toEqual(['judge/1']);
    expect((screen.getByTestId('replica-filter') as HTMLInputElement).value).toBe('judge/1');
  });

  it('marks a model an operator drained as held, and only that one', () => {
    const state = demoState({ phase: 0 });
    state.roles.find((r) => r.role === 'rollout')!.models.policy!.held = true;
    render(<ReplicasPage state={state} />, { wrapper: Providers });
    const held = screen
      .getAllByTestId('held-badge')
      .map((b) => b.closest<HTMLElement>('[data-testid=model-section]'));
    expect(held.map((m) => m?.dataset.model)).toEqual(['policy']);
  });

  it("counts each replica's restarts under a header that says what it counts", () => {
    render(<ReplicasPage state={demoState({ phase: 0, restarted: { 'policy/1': 2 } })} />, {
      wrapper: Providers,
    });
    const head = screen.getAllByTestId('replica-restarts-head')[0]!;
    expect(head.textContent).toBe('restarts');
    expect(head.title).toMatch(/engine process was started again/);
    const restarts = Object.fromEntries(
      screen
        .getAllByTestId('replica-restarts')
        .map((c) => [c.closest('tr')?.dataset.engineId, c.textContent]),
    );
    expect(restarts).toMatchObject({ 'policy/0': '0', 'policy/1': '2', 'judge/0': '0' });
  });

  it('marks replicas whose weights are behind their model target', () => {
    const state = demoState({ phase: 0 });
    const rollout = state.roles.find((r) => r.role === 'rollout')!;
    rollout.models.policy!.weight_version = 'v4';
    state.replicas.find((r) => r.engine_id === 'policy/2')!.weight_version = 'v4';
    render(<ReplicasPage state={state} />, { wrapper: Providers });
    const behindRows = screen
      .getAllByTestId('replica-weights')
      .filter((c) => c.dataset.behind === 'true')
      .map((c) => c.closest('tr')?.dataset.engineId);
    expect(behindRows).toEqual(['policy/0', 'policy/1', 'policy/3']);
  });

  it("shows each replica's circuit at the gateway: open and half-open stand out, and filter finds them", () => {
    const state = demoState({ phase: 1, circuits: { 'judge/1': 'open', 'judge/0': 'half_open' } });
    // A model an SGLang router serves has no circuit of the gateway's.
    state.roles.find((r) => r.role === 'teacher')!.models['math-teacher']!.router_url =
      'http://127.0.0.1:31000';
    state.replicas.find((r) => r.engine_id === 'math-teacher/0')!.circuit = null;
    render(<ReplicasPage state={state} />, { wrapper: Providers });
    const circuitOf = (id: string) => {
      const row = screen.getAllByTestId('replica-row').find((r) => r.dataset.engineId === id)!;
      return within(row).getByTestId('replica-circuit');
    };
    expect(circuitOf('judge/1').dataset.circuit).toBe('open');
    expect(circuitOf('judge/1').className).toContain('badge-circuit-open');
    expect(circuitOf('judge/1').textContent).toBe('open');
    expect(circuitOf('judge/0').textContent).toBe('half-open');
    expect(circuitOf('policy/0').dataset.circuit).toBe('closed');
    expect(circuitOf('policy/0').className).not.toContain('badge');
    expect(circuitOf('math-teacher/0').dataset.circuit).toBe('none');
    // "open" finds open and half-open circuits (not closed ones).
    fireEvent.change(screen.getByTestId('replica-filter'), { target: { value: 'open' } });
    expect(engines()).toEqual(['judge/0', 'judge/1']);
  });
});
