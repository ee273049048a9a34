import { render, screen, within } from '@testing-library/react';
import type { ActivationGroupView } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { demoState } from '../../testing/demo-state.ts';
import { ActivationGroupPanel, MAX_TRANSITIONS, orderedTransitions } from './phase-timeline.tsx';

const NOW = 1_764_000_000_000;

function group(overrides: Partial<ActivationGroupView> = {}): ActivationGroupView {
  return { ...demoState({ now: NOW }).activation_groups[0]!, ...overrides };
}

// Deliberately out of order: the timeline must sort by start time.
const TRANSITIONS: ActivationGroupView['transitions'] = [
  {
    id: 'c',
    from: 'score',
    to: 'opd',
    started_at: NOW - 3000,
    ended_at: null,
    duration_ms: null,
    status: 'running',
    error: null,
  },
  {
    id: 'a',
    from: null,
    to: 'rollout',
    started_at: NOW - 90_000,
    ended_at: NOW - 88_500,
    duration_ms: 1500,
    status: 'ok',
    error: null,
  },
  {
    id: 'b',
    from: 'rollout',
    to: 'score',
    started_at: NOW - 30_000,
    ended_at: NOW - 17_500,
    duration_ms: 12_500,
    status: 'failed',
    error: 'judge/1 did not release memory',
  },
];

describe('phase timeline', () => {
  it('lists transitions oldest first with their durations', () => {
    render(<ActivationGroupPanel group={group({ transitions: TRANSITIONS })} now={NOW} />);
    const rows = screen.getAllByTestId('transition');
    expect(rows.map((r) => r.dataset.to)).toEqual(['rollout', 'score', 'opd']);
    expect(rows.map((r) => within(r).getByTestId('transition-duration').textContent)).toEqual([
      '1.50 s',
      '12.5 s',
      '3.00 s so far',
    ]);
    expect(rows.map((r) => r.dataset.status)).toEqual(['ok', 'failed', 'running']);
    expect(within(rows[1]!).getByTestId('transition-error').textContent).toBe(
      'judge/1 did not release memory',
    );
    expect(rows[0]!.textContent).toContain('∅');
  });

  it('derives a missing duration from the end time, and the running time from the state time', () => {
    const rows = orderedTransitions(
      group({
        transitions: [{ ...TRANSITIONS[1]!, duration_ms: null }, { ...TRANSITIONS[0]! }],
      }),
      NOW + 1000,
    );
    expect(rows.map((r) => r.shownMs)).toEqual([1500, 4000]);
  });

  it('shows the schedule with the current phase and the lease holder', () => {
    render(
      <ActivationGroupPanel group={group({ current_phase: 'score', lease_holder: 'genrm' })} now={NOW} />,
    );
    const chips = screen.getAllByTestId('phase-chip');
    expect(chips.map((c) => c.dataset.phase)).toEqual(['rollout', 'score', 'opd', 'train']);
    expect(chips.filter((c) => c.dataset.current === 'true').map((c) => c.dataset.phase)).toEqual(['score']);
    expect(screen.getByTestId('current-phase').textContent).toBe('score');
    expect(screen.getByTestId('lease-holder').textContent).toBe('genrm');
  });

  it('shows a blocked lease with its reason and the barriers waiting', () => {
    render(
      <ActivationGroupPanel
        group={group({
          blocked: { reason: 'rollout/policy still has 3 requests in flight', at: NOW - 2500 },
          barriers: [{ phase: 'train', waiting: 2, since: NOW - 8000 }],
        })}
        now={NOW}
      />,
    );
    expect(screen.getByTestId('blocked-reason').textContent).toBe(
      'rollout/policy still has 3 requests in flight',
    );
    expect(screen.getByTestId('blocked').textContent).toContain('2.50 s');
    const barrier = screen.getByTestId('barrier');
    expect(barrier.textContent).toContain('train');
    expect(barrier.textContent).toContain('2 waiting');
  });

  it('has designed empty states', () => {
    render(
      <ActivationGroupPanel group={group({ transitions: [], barriers: [], blocked: null })} now={NOW} />,
    );
    expect(screen.getByTestId('timeline-empty').textContent).toBe('No phase transition yet.');
    expect(screen.queryByTestId('blocked')).toBeNull();
    expect(screen.getByText('No barrier waiting.')).toBeTruthy();
  });

  it('keeps the newest transitions when there are many', () => {
    const many = Array.from({ length: MAX_TRANSITIONS + 5 }, (_, i) => ({
      ...TRANSITIONS[1]!,
      id: `t${i}`,
      to: `p${i}`,
      started_at: NOW - 1_000_000 + i * 1000,
    }));
    render(<ActivationGroupPanel group={group({ transitions: many })} now={NOW} />);
    const rows = screen.getAllByTestId('transition');
    expect(rows).toHaveLength(MAX_TRANSITIONS);
    expect(rows[0]!.dataset.to).toBe('p5');
    expect(rows.at(-1)!.dataset.to).toBe(`p${MAX_TRANSITIONS + 4}`);
    expect(screen.getByTestId('transitions-hidden').textContent).toContain('5 older transitions');
  });
});
