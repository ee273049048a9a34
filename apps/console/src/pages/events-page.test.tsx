import { readFileSync } from 'node:fs';
import { join } from 'node:path';
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

  it('wraps a long message within its column and keeps it whole in the tooltip', () => {
    const state = demoState();
    const long = `submit_batch genrm_score: request=${JSON.stringify({ samples: Array(40).fill('s') })}`;
    state.events = [{ ...state.events[0]!, message: long }];
    render(<EventsPage state={state} />);
    const cell = screen.getByTestId('event-message');
    expect(cell.textContent).toBe(long);
    expect(cell.title).toBe(long);
    expect(cell.className).toBe('message');
    // The stylesheet lets this column (and only it) wrap; the e2e test measures it at 1400 px in Chromium.
    const css = readFileSync(join(import.meta.dirname, '..', 'styles.css'), 'utf8');
    expect(css).toMatch(/\.table td\.message \{[^}]*white-space: normal;[^}]*overflow-wrap: anywhere;/);
  });

  it('has a designed empty state', () => {
    render(<EventsPage state={demoState({ events: [] })} />);
    expect(screen.getByText('No event yet.')).toBeTruthy();
  });
});
