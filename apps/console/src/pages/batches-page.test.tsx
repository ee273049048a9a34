import { render, screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { demoState } from '../../testing/demo-state.ts';
import { BatchesPage } from './batches-page.tsx';

const NOW = 1_764_000_000_000;

describe('Deferred batches page', () => {
  it('counts batches by state with their sample totals', () => {
    render(<BatchesPage state={demoState({ now: NOW })} />);
    const counts = Object.fromEntries(
      screen.getAllByTestId('batch-count').map((c) => [c.dataset.state, c.textContent]),
    );
    expect(counts.queued).toBe('1 queued · 64 samples');
    expect(counts.failed).toBe('1 failed · 128 samples');
  });

  it('shows durations, running ones as "so far", and the failure reason', () => {
    render(<BatchesPage state={demoState({ now: NOW })} />);
    const rows = screen.getAllByTestId('batch-row');
    expect(rows.map((r) => r.dataset.state)).toEqual(['queued', 'scoring', 'failed', 'committed']);
    const cells = (i: number) => [...rows[i]!.querySelectorAll('td')].map((td) => td.textContent);
    expect(cells(1).slice(5, 8)).toEqual(['5.00 s', '4.00 s so far', '9.00 s so far']);
    expect(cells(2).slice(5, 9)).toEqual(['10.0 s', '1.00 s', '11.0 s', 'teacher engine timeout after 30 s']);
  });

  it('shows only the total of a finished batch whose start time is unknown', () => {
    const state = demoState({
      now: NOW,
      batches: [
        {
          id: 'b',
          kind: 'genrm',
          state: 'committed',
          size: 8,
          created_at: NOW - 12_000,
          started_at: null,
          ended_at: NOW - 2000,
          failure: null,
        },
      ],
    });
    render(<BatchesPage state={state} />);
    const row = screen.getByTestId('batch-row');
    expect(within(row).getByTestId('batch-total').textContent).toBe('10.0 s');
    expect(row.textContent).not.toContain('so far');
  });

  it('has a designed empty state', () => {
    render(<BatchesPage state={demoState({ now: NOW, batches: [] })} />);
    expect(screen.getByTestId('batches-empty').textContent).toContain('No deferred batch yet');
  });
});
