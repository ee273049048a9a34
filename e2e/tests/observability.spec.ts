import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { dashboardQueries, missingMetrics } from '@uis/gateway';
import { ADMIN_TOKEN, open, shot } from './helpers.ts';

test.describe.configure({ mode: 'serial' });

const num = async (el: ReturnType<import('@playwright/test').Page['getByTestId']>, attr: string) =>
  Number(await el.getAttribute(attr));

test('the time series move every second while the demo loop serves', async ({ page }) => {
  await open(page, 'timeseries');
  const rps = page.getByTestId('chart-rollout-policy-rps');
  await expect(rps).toBeVisible({ timeout: 60_000 });
  // A full 15-minute window of 1 s points, pushed and extended by the subscription (no reload).
  expect(await num(rps, 'data-points')).toBeGreaterThanOrEqual(899);
  const last = await num(rps, 'data-last');
  await expect.poll(() => num(rps, 'data-last'), { timeout: 10_000 }).toBeGreaterThan(last);
  // The demo's rollout requests show up as requests/s and tokens/s.
  await expect.poll(() => num(rps, 'data-sum'), { timeout: 90_000 }).toBeGreaterThan(0);
  const tokens = page.getByTestId('chart-rollout-policy-tps');
  const before = await num(tokens, 'data-sum');
  await expect.poll(() => num(tokens, 'data-sum'), { timeout: 90_000 }).toBeGreaterThan(before);
  await expect(page.getByTestId('chart-rollout-policy-latency').locator('canvas')).toBeVisible();
  await expect(page.getByTestId('chart-rollout-policy-ttft')).toBeVisible();
  await shot(page, 'page-timeseries');
});

test('the GPU-time view adds RL steps as the loop runs and matches the transition records', async ({
  page,
  request,
}) => {
  await open(page, 'gputime');
  const group = page.getByTestId('gpu-group-actor');
  await expect(group.getByTestId('gantt')).toBeVisible({ timeout: 120_000 });
  const trend = group.getByTestId('gpu-trend');
  const steps = await num(trend, 'data-steps');
  await expect.poll(() => num(trend, 'data-steps'), { timeout: 120_000 }).toBeGreaterThan(steps);
  await expect(group.getByTestId('gantt-bundle-15')).toBeVisible();

  // Release: every phase of the demo holds all 16 GPUs, so its GPU-seconds are 16 x the offload steps the
  // coordinator recorded inside the shown step.
  const from = await num(group, 'data-from');
  const to = await num(group, 'data-to');
  const gpus = await num(group, 'data-gpus');
  const res = await request.get('/admin/events?kind=transition.step&subject=actor&limit=1000', {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  });
  // The admin API's answer envelope: `{ok, operation_id, result}`.
  const { events } = (
    (await res.json()) as {
      result: { events: Array<{ at: number; duration_ms: number; data: { step: string } }> };
    }
  ).result;
  const offloadS = events
    .filter((e) => e.data.step === 'offload' && e.at - e.duration_ms >= from && e.at <= to)
    .reduce((n, e) => n + e.duration_ms / 1000, 0);
  expect(offloadS).toBeGreaterThan(0);
  const release = await num(group.locator('[data-part=release]'), 'data-gpu-seconds');
  expect(release).toBeCloseTo(gpus * offloadS, 3);
  await expect(group.getByTestId('gpu-bubbles')).toContainText('%');
  await shot(page, 'page-gputime');
});

test('every metric the Grafana dashboard queries is in the live /metrics of the demo', async ({
  request,
}) => {
  const dashboard = JSON.parse(
    readFileSync(
      join(import.meta.dirname, '..', '..', 'apps', 'gateway', 'grafana', 'uis-dashboard.json'),
      'utf8',
    ),
  );
  const text = await (await request.get('/metrics')).text();
  expect(dashboardQueries(dashboard).length).toBeGreaterThanOrEqual(15);
  expect(missingMetrics(dashboard, text)).toEqual([]);
  // The demo's loop has produced the token and GPU-time series the dashboard draws.
  expect(text).toMatch(/^uis_generation_tokens_total\{role="rollout",model="policy"\} [1-9]/m);
  expect(text).toMatch(/^uis_gpu_time_seconds_total\{group="actor",part="release"\} [0-9.]*[1-9]/m);
});
