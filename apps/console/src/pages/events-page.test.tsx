import { fireEvent, render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { demoState } from '../../testing/demo-state.ts';
import { EventsPage } from './events-page.tsx';

describe('Events page', () => {
  it('lists the audit log newest first, admin actions stand out, and filters', () => {
    render(<EventsPage state={demoState()} />);
    const rows = () => screen.getAllByTestId('event-row');
    expect(rows().map((r) => r.dataset.kind)).toEqual([
      'admin.drain',
      'phase.transition',
      'phase.transition',
    ]);
    expect(rows()[0]!.className).toBe('row-admin');
    expect(rows()[1]!.className).toBe('');
    fireEvent.change(screen.getByTestId('event-filter'), { target: { value: 'driver' } });
    expect(rows().map((r) => r.textContent)).toEqual([expect.stringContaining('rollout -> score')]);
    fireEvent.change(screen.getByTestId('event-filter'), { target: { value: 'nothing like this' } });
    expect(screen.getByText('No event matches the filter.')).toBeTruthy();
  });

  it('has a designed empty state', () => {
    render(<EventsPage state={demoState({ events: [] })} />);
    expect(screen.getByText('No event yet.')).toBeTruthy();
  });
});
