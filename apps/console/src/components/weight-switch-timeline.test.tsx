import { render, screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { type WeightSwitch, WeightSwitchTimeline } from './weight-switch-timeline.tsx';

function sw(id: number, over: Partial<WeightSwitch>): WeightSwitch {
  const to = String(id + 1);
  return {
    id,
    model: 'policy',
    mode: 'pause_in_place',
    mixed_versions: 'forbid',
    on_failure: 'quarantine',
    from_version: String(id),
    to_version: to,
    weight_version: to,
    outcome: 'switched',
    started_at: Date.UTC(2026, 0, 1, 12, 0, id),
    duration_ms: 210.4,
    slowest_update_ms: 200,
    phases_ms: { stopped: 3, loaded: 203, read_back: 204, committed: 204, continued: 209, published: 206 },
    topology_revision: 10 + id,
    quarantined: [],
    engines: ['policy/0', 'policy/1'].map((engine_id) => ({
      engine_id,
      ok: true,
      weight_version: to,
      quarantined: false,
      update_ms: 200,
    })),
    ...over,
  };
}

describe('weight switch timeline', () => {
  it('shows each switch newest first with its mode, versions, duration, outcome and every replica version', () => {
    const failed = sw(1, {
      mode: 'abort',
      outcome: 'quarantined',
      quarantined: ['policy/1'],
      engines: [
        { engine_id: 'policy/0', ok: true, weight_version: '2', quarantined: false, update_ms: 190 },
        {
          engine_id: 'policy/1',
          ok: false,
          weight_version: '1',
          quarantined: true,
          update_ms: 12,
          error: 'injected fault',
        },
      ],
    });
    render(<WeightSwitchTimeline switches={[sw(0, { mode: 'drain' }), failed]} />);
    const rows = screen.getAllByTestId('switch-row');
    expect(rows.map((r) => [r.dataset.mode, r.dataset.outcome])).toEqual([
      ['abort', 'quarantined'],
      ['drain', 'switched'],
    ]);
    expect(rows[0]!.textContent).toContain('1 → 2');
    expect(rows[1]!.textContent).toContain('210');
    const cells = within(rows[0]!).getAllByTestId('switch-cell');
    expect(cells.map((c) => [c.dataset.engineId, c.textContent])).toEqual([
      ['policy/0', '2'],
      ['policy/1', '1 (quarantined)'],
    ]);
    expect(cells[1]!.title).toBe('injected fault');
  });

  it('shows nothing for a model that never switched', () => {
    const { container } = render(<WeightSwitchTimeline switches={[]} />);
    expect(container.textContent).toBe('');
  });
});
