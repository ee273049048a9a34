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
  // 1 s points from when the service started (not a whole window before it), pushed and extended by the
  // subscription (no reload). Read at once: the chart moves every second.
  const [first = 0, last = 0, points = 0] = await rps.evaluate((el) =>
    ['first', 'last', 'points'].map((k) => Number((el as HTMLElement).dataset[k])),
  );
  expect(points).toBe(last - first + 1);
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

test.describe('in a browser whose local time is not UTC', () => {
  test.use({ timezoneId: 'Asia/Kolkata' });

  test('the time axis starts when the service started and reads UTC, as the header does', async ({
    page,
    request,
  }) => {
    const metrics = await (await request.get('/metrics')).text();
    const started = Number(/^process_start_time_seconds (\d+)/m.exec(metrics)?.[1]);
    expect(started).toBeGreaterThan(0);
    await open(page, 'timeseries');
    const rps = page.getByTestId('chart-rollout-policy-rps');
    await expect(rps).toBeVisible({ timeout: 60_000 });
    expect(await num(rps, 'data-first')).toBeGreaterThanOrEqual(started);
    expect(await num(rps, 'data-first')).toBeLessThan(started + 60);
    // The legend shows the time under the cursor (uPlot's `YYYY-MM-DD h:mmam`): at the right end, the last point.
    const over = rps.locator('.u-over');
    const box = (await over.boundingBox())!;
    await page.mouse.move(box.x + box.width - 1, box.y + box.height / 2);
    const last = await num(rps, 'data-last');
    const shown = (await rps.locator('.u-legend .u-series').first().locator('.u-value').textContent()) ?? '';
    const [, h, m, ampm] = /(\d{1,2}):(\d\d)(am|pm)/.exec(shown) ?? [];
    expect(h, `legend x value: ${shown}`).toBeDefined();
    const minutes = ((Number(h) % 12) + (ampm === 'pm' ? 12 : 0)) * 60 + Number(m);
    const utc = new Date(last * 1000);
    const expected = utc.getUTCHours() * 60 + utc.getUTCMinutes();
    // Within two minutes of the last point in UTC (Kolkata's local time is 5 h 30 min off).
    expect(Math.min(Math.abs(minutes - expected), 1440 - Math.abs(minutes - expected))).toBeLessThanOrEqual(
      2,
    );
  });
});

test('the GPU-time view adds RL steps as the loop runs and matches the transition records', async ({
  page,
  request,
}) => {
  await open(page, 'gputime');
  const group = page.getByTestId('gpu-group-actor');
  await expect(group.getByTestId('gantt')).toBeVisible({ timeout: 120_000 });
  const trend = group.getByTestId('gpu-trend');
  // A newer step comes in (the view keeps the last 30: after that the count stays and the newest moves on).
  const last = await num(trend, 'data-last-step');
  await expect.poll(() => num(trend, 'data-last-step'), { timeout: 120_000 }).toBeGreaterThan(last);
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
