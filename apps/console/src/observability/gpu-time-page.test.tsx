import { render, screen, within } from '@testing-library/react';
import { GPU_TIME_PARTS, type GpuTimeReport } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { GpuTimeBody } from './gpu-time-page.tsx';

const zeros = () =>
  Object.fromEntries(GPU_TIME_PARTS.map((p) => [p, 0])) as Record<(typeof GPU_TIME_PARTS)[number], number>;

/** One 10 s step on 4 GPUs: 2 GPU-s of release, 1 of onload, 1 of weight sync (1 s of wall-clock switching). */
function report(predicted: boolean): GpuTimeReport {
  const gpu_seconds = { ...zeros(), work: 36, release: 2, onload: 1, weight_sync: 1 };
  return {
    groups: [
      {
        group: 'actor',
        first_phase: 'rollout',
        steps: [
          {
            step: 1,
            from: 0,
            to: 10_000,
            gpu_seconds,
            shares: Object.fromEntries(
              Object.entries(gpu_seconds).map(([k, v]) => [k, v / 40]),
            ) as typeof gpu_seconds,
            bundles: [0, 1, 2, 3].map((bundle) => ({ bundle, segments: [] })),
          },
        ],
        ...(predicted
          ? {
              predicted: {
                order: 'configured' as const,
                bubble_s: 0.96,
                release_all_bubble_s: 2.46,
                configured_bubble_s: 0.96,
                switches: [
                  {
                    from: 'rollout',
                    to: 'genrm_score',
                    predicted_s: 0.25,
                    release_all_s: 0.5,
                    kept: ['policy: weights+kv_cache+cuda_graph', 'judge: weights+cuda_graph'],
                  },
                  {
                    from: 'train',
                    to: 'rollout',
                    predicted_s: 0.93,
                    release_all_s: 0.96,
                    kept: ['policy: weights+cuda_graph'],
                  },
                ],
              },
            }
          : {}),
      },
    ],
  };
}

describe('GPU-time page: predicted vs measured', () => {
  it('shows the predicted and the measured switch time per step and what keeping saved per switch', () => {
    render(<GpuTimeBody report={report(true)} error={null} />);
    expect(screen.getByTestId('gpu-predicted-s').textContent).toBe('0.96 s');
    // (2 + 1 + 1) GPU-seconds over 4 GPUs
    expect(screen.getByTestId('gpu-measured-s').textContent).toBe('1.00 s');
    expect(screen.getByTestId('gpu-saved-s').textContent).toBe('1.50 s');
    const rows = within(screen.getByTestId('gpu-decisions')).getAllByRole('row').slice(1);
    expect(rows.map((r) => r.dataset.switch)).toEqual(['rollout->genrm_score', 'train->rollout']);
    expect(rows[0]?.textContent).toContain(
      '0.25 s (policy: weights+kv_cache+cuda_graph, judge: weights+cuda_graph)',
    );
  });

  it('has no prediction for a group whose models are not sized', () => {
    render(<GpuTimeBody report={report(false)} error={null} />);
    expect(screen.queryByTestId('gpu-predicted')).toBeNull();
    expect(screen.getByTestId('gpu-bubbles').textContent).toContain('10.0%');
  });
});
