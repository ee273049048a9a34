import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fireEvent, render, screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { PlanPage } from './plan-page.tsx';

const example = (name: string) =>
  readFileSync(join(import.meta.dirname, '../../../../examples', name), 'utf8');

describe('Plan page', () => {
  it('lists every violation of an overlapping split layout with code, path and message', () => {
    render(<PlanPage initialText={example('bad-split-overlap.yaml')} />);
    const items = screen.getAllByTestId('violation');
    expect(items.length).toBeGreaterThanOrEqual(1);
    const overlap = items.find((i) => i.dataset.code === 'split_overlap');
    expect(overlap).toBeTruthy();
    expect(within(overlap!).getByTestId('violation-path').textContent).toBe(
      'roles.genrm.models[0].engine_groups[0]',
    );
    expect(overlap!.textContent).toMatch(/overlap/);
    expect(screen.queryByTestId('gpu-grid')).toBeNull();
  });

  it('shows the placement grid for a valid config, and violations again after an edit breaks it', () => {
    render(<PlanPage initialText={example('demo.yaml')} />);
    expect(screen.getByTestId('plan-ok').textContent).toContain('colocated defer');
    expect(screen.getAllByTestId('gpu')).toHaveLength(16);
    // No live state here: blocks say how each engine is parallelised instead of a state.
    const teacher = screen
      .getAllByTestId('replica-block')
      .find((b) => b.dataset.engineId === 'math-teacher/1')!;
    expect(teacher.textContent).toContain('TP8');
    expect(teacher.className).toContain('block-current');
    fireEvent.change(screen.getByTestId('plan-input'), {
      target: {
        value: example('demo.yaml').replace('gpus_per_engine: 8, tp: 8', 'gpus_per_engine: 8, tp: 3'),
      },
    });
    const codes = screen.getAllByTestId('violation').map((v) => v.dataset.code);
    expect(codes.length).toBeGreaterThan(0);
    expect(screen.queryByTestId('gpu-grid')).toBeNull();
  });

  it('sets the configured order of the deferred phases beside the optimized one, as uis plan --compare', () => {
    render(<PlanPage initialText={example('demo.yaml')} />);
    const demo = screen.getByTestId('memory-compare');
    expect(within(demo).getByTestId('memory-configured-s').textContent).toBe('0.23 s');
    expect(within(demo).getByTestId('memory-optimized-s').textContent).toBe('0.22 s');
    expect(within(demo).getByTestId('memory-verdict').textContent).toContain(
      'Optimized saves 0.02 s per step; set schedule.defer.order: optimized to use it.',
    );
    const rows = (id: string) =>
      within(within(demo).getByTestId(id))
        .getAllByTestId('memory-switch')
        .map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent));
    expect(rows('memory-configured').at(-1)).toEqual([
      'train → rollout',
      '–',
      'policy: kv_cache+sync, policy-code: kv_cache+sync',
      '8.2 GB',
      '0.17 s',
    ]);
    // The optimized order merges the scorers, whose KV caches fit together.
    expect(rows('memory-optimized').map((r) => [r[0], r[4]])).toEqual([
      ['rollout → genrm_score+teacher_opd', '0.03 s'],
      ['genrm_score+teacher_opd → train', '0.01 s'],
      ['train → rollout', '0.17 s'],
    ]);
    // Without sizes the planner cannot predict: the unsized models are named.
    fireEvent.change(screen.getByTestId('plan-input'), { target: { value: example('defer.yaml') } });
    expect(screen.getByTestId('memory-compare').textContent).toContain('unsized: policy, judge, teacher');
  });

  it('reports config errors with the path the user wrote', () => {
    render(<PlanPage initialText={'cluster:\n  nodes: []\nroles: {}\n'} />);
    const paths = screen.getAllByTestId('violation-path').map((p) => p.textContent);
    expect(paths).toContain('cluster.nodes');
  });

  it('reads a pasted Relax command line', () => {
    render(
      <PlanPage
        initialText={`python train.py \\\n  --resource '{"actor": [1, 8], "rollout": [1, 8]}' --colocate --offload \\\n  --rollout-num-gpus-per-engine 2 --hf-checkpoint /m`}
      />,
    );
    expect(screen.getByText(/read as Relax flags/)).toBeTruthy();
    expect(screen.getAllByTestId('replica-block')).toHaveLength(4);
  });
});
