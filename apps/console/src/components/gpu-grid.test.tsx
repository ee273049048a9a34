import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { render, screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { DEMO_NODES, demoState } from '../../testing/demo-state.ts';
import { buildGridModel } from '../lib/gpu-grid.ts';
import { planFromText } from '../lib/plan-input.ts';
import { GpuGrid } from './gpu-grid.tsx';

function renderState(state = demoState()) {
  const grid = buildGridModel({
    nodes: state.cluster.nodes,
    plan: state.plan,
    replicas: state.replicas,
    activationGroups: state.activation_groups,
  });
  return render(<GpuGrid grid={grid} />);
}

function gpu(node: string, id: number): HTMLElement {
  const el = screen
    .getAllByTestId('gpu')
    .find((c) => c.dataset.node === node && c.dataset.gpu === String(id));
  if (!el) throw new Error(`no GPU cell ${node}/${id}`);
  return el;
}

describe('GpuGrid', () => {
  it('draws 16 GPUs on 2 nodes, each owned by every role of its phases', () => {
    renderState();
    const cells = screen.getAllByTestId('gpu');
    expect(cells).toHaveLength(16);
    expect(screen.getAllByTestId('gpu-node').map((n) => n.dataset.node)).toEqual(['node-0', 'node-1']);
    for (const cell of cells) {
      expect(cell.dataset.roles?.split(' ').sort()).toEqual(['genrm', 'rollout', 'teacher', 'train']);
    }
    expect(gpu('node-1', 7).dataset.owners).toBe(
      'rollout/policy@rollout genrm/judge@score teacher/math-teacher@opd train@train',
    );
  });

  it('gives each GPU the owners of a real planner layout (two rollout models split across the nodes)', () => {
    const text = readFileSync(join(import.meta.dirname, '../../../../examples/demo.yaml'), 'utf8');
    const result = planFromText(text);
    if (result.kind !== 'plan') throw new Error(`demo.yaml did not plan: ${JSON.stringify(result)}`);
    render(<GpuGrid grid={buildGridModel({ nodes: result.config.cluster.nodes, plan: result.plan })} />);
    expect(screen.getAllByTestId('gpu')).toHaveLength(16);
    expect(gpu('node-0', 3).dataset.owners).toContain('rollout/policy@rollout');
    expect(gpu('node-0', 3).dataset.owners).not.toContain('policy-code');
    expect(gpu('node-1', 3).dataset.owners).toContain('rollout/policy-code@rollout');
    expect(gpu('node-1', 3).dataset.owners).toContain('genrm/judge@genrm_score');
    const blocks = screen.getAllByTestId('replica-block');
    // policy starts 2 of its replicas; its placeholder group (node-0 GPUs 4-7) is room to scale out, started empty.
    expect(blocks.filter((b) => b.dataset.lane === 'rollout')).toHaveLength(6);
    expect(blocks.find((b) => b.dataset.engineId === 'policy-code/2')?.style.gridColumn).toBe('6 / span 2');
  });

  it('draws a multi-node engine as one block spanning its nodes', () => {
    renderState();
    const teacher = screen
      .getAllByTestId('replica-block')
      .filter((b) => b.dataset.engineId === 'math-teacher/0');
    expect(teacher).toHaveLength(1);
    expect(teacher[0]!.dataset.nodeSpan).toBe('2');
    expect(teacher[0]!.style.gridRow).toMatch(/span 2$/);
    expect(teacher[0]!.style.gridColumn).toBe('2 / span 8');
    expect(within(teacher[0]!).getByText(/2 nodes/)).toBeTruthy();
    // Single-node replicas span one row.
    const policy = screen.getAllByTestId('replica-block').find((b) => b.dataset.engineId === 'policy/2')!;
    expect(policy.dataset.nodeSpan).toBe('1');
  });

  it('draws a 4+4 GPU engine on two nodes as one block too (multinode-tp example)', () => {
    const text = readFileSync(join(import.meta.dirname, '../../../../examples/multinode-tp.yaml'), 'utf8');
    const result = planFromText(text);
    if (result.kind !== 'plan') throw new Error('multinode-tp.yaml did not plan');
    render(<GpuGrid grid={buildGridModel({ nodes: result.config.cluster.nodes, plan: result.plan })} />);
    const big0 = screen.getAllByTestId('replica-block').filter((b) => b.dataset.engineId === 'big/0');
    expect(big0).toHaveLength(1);
    expect(big0[0]!.dataset.nodeSpan).toBe('2');
  });

  it('highlights a replica that runs somewhere else than planned, and shows where it was planned', () => {
    renderState(demoState({ moved: { 'policy/1': [{ node: 'node-1', gpu_ids: [4, 5, 6, 7] }] } }));
    const moved = screen.getAllByTestId('replica-block').find((b) => b.dataset.engineId === 'policy/1')!;
    expect(moved.dataset.mismatch).toBe('true');
    expect(moved.className).toContain('block-mismatch');
    expect(within(moved).getByTestId('mismatch-flag').textContent).toBe('not where planned');
    // Drawn where it actually runs: node-1 row of the rollout lane, GPUs 4..7.
    expect(moved.style.gridColumn).toBe('6 / span 4');
    const ghost = screen.getAllByTestId('planned-block').find((b) => b.dataset.engineId === 'policy/1')!;
    expect(ghost.style.gridColumn).toBe('6 / span 4');
    expect(ghost.style.gridRow).not.toBe(moved.style.gridRow);
    const others = screen.getAllByTestId('replica-block').filter((b) => b.dataset.engineId !== 'policy/1');
    expect(others.every((b) => b.dataset.mismatch === 'false')).toBe(true);
    expect(screen.getAllByTestId('mismatch-flag')).toHaveLength(1);
  });

  it('marks the lane of the current phase and shows replica states', () => {
    renderState(demoState({ phase: 1 }));
    const current = screen.getAllByTestId('lane').filter((l) => l.dataset.current === 'true');
    expect(current.map((l) => l.dataset.phase)).toEqual(['score']);
    const judge = screen.getAllByTestId('replica-block').filter((b) => b.dataset.model === 'judge');
    expect(judge.map((b) => b.dataset.state)).toEqual(['ready', 'ready']);
    const policy = screen.getAllByTestId('replica-block').filter((b) => b.dataset.model === 'policy');
    expect(new Set(policy.map((b) => b.dataset.state))).toEqual(new Set(['sleeping']));
    expect(DEMO_NODES).toHaveLength(2);
  });

  it('links live replica blocks to their row on the Replicas page when asked to', () => {
    const state = demoState();
    const grid = buildGridModel({ nodes: state.cluster.nodes, plan: state.plan, replicas: state.replicas });
    render(<GpuGrid grid={grid} replicaHref={(id) => `#/replicas?q=${encodeURIComponent(id)}`} />);
    const teacher = screen
      .getAllByTestId('replica-block')
      .find((b) => b.dataset.engineId === 'math-teacher/0')!;
    expect(teacher.tagName).toBe('A');
    expect(teacher.getAttribute('href')).toBe('#/replicas?q=math-teacher%2F0');
    expect(screen.getAllByTestId('train-block').every((b) => b.tagName === 'DIV')).toBe(true);
  });
});
