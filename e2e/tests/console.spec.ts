import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { ADMIN_TOKEN, EXAMPLES, open, shot } from './helpers.ts';

// One `uis demo` serves every test; they run in order in one worker because draining changes the demo's state.
test.describe.configure({ mode: 'serial' });

test('the cluster grid shows 16 GPUs on 2 nodes with the demo roles', async ({ page }) => {
  await open(page, 'cluster');
  await expect(page.getByTestId('connection')).toHaveAttribute('data-connection', 'live');
  const gpus = page.getByTestId('gpu');
  await expect(gpus).toHaveCount(16);
  await expect(page.getByTestId('gpu-node')).toHaveCount(2);
  const roles = new Set(
    (await gpus.evaluateAll((cells) => cells.map((c) => c.getAttribute('data-roles') ?? ''))).flatMap((r) =>
      r.split(' ').filter(Boolean),
    ),
  );
  for (const role of ['rollout', 'genrm', 'teacher'])
    expect(roles, `role ${role} on the grid`).toContain(role);
  // Every GPU is owned by someone in some phase.
  for (const owners of await gpus.evaluateAll((cells) =>
    cells.map((c) => c.getAttribute('data-owners') ?? ''),
  )) {
    expect(owners).not.toBe('');
  }
  await expect(page.getByTestId('replica-block').first()).toBeVisible();
  await shot(page, 'cluster');
  // A replica on the grid leads to its row on the Replicas page.
  const block = page.getByTestId('replica-block').first();
  const engine = (await block.getAttribute('data-engine-id')) ?? '';
  await block.click();
  await expect(page.getByTestId('page-replicas')).toBeVisible();
  await expect(page.getByTestId('replica-filter')).toHaveValue(engine);
  await expect(page.locator(`[data-testid=replica-row][data-engine-id="${engine}"]`)).toBeVisible();
});

test('the phase changes on screen as the demo loop runs', async ({ page }) => {
  await open(page, 'phases');
  const current = page.getByTestId('current-phase').first();
  await expect(current).not.toHaveText('—');
  const first = (await current.textContent()) ?? '';
  await shot(page, 'phases');
  // No reload, no click: the subscription pushes the next phase.
  await expect(current).not.toHaveText(first, { timeout: 90_000 });
  await expect(page.getByTestId('transition').first()).toBeVisible();
  await expect(page.locator('[data-testid=phase-chip][data-current=true]')).toHaveCount(
    await page.getByTestId('activation-group').count(),
  );
  await shot(page, 'phases-after-change');
});

test('a wrong admin token is refused with a visible message', async ({ page }) => {
  await open(page, 'replicas');
  await page.getByTestId('token-input').fill('not-the-token');
  await page.getByTestId('token-submit').click();
  await expect(page.getByTestId('token-error')).toBeVisible();
  await expect(page.getByTestId('token-error')).toContainText(/refused|unauthori[sz]ed/i);
  // An action tried with a wrong token is refused too. (That a 401 changes nothing is asserted by the gateway's
  // admin tests; here the demo loop drains rollout on its own at every phase change, so replica states are no
  // evidence either way.)
  const model = page
    .locator('[data-testid=role-section][data-role=rollout] [data-testid=model-section]')
    .first();
  await model.getByTestId('drain-model').click();
  await page.getByTestId('confirm-token').fill('still-wrong');
  await page.getByTestId('confirm-ok').click();
  await expect(page.getByTestId('action-error')).toContainText(/refused|unauthori[sz]ed/i);
  await expect(page.getByTestId('token-input')).toBeVisible();
  await shot(page, 'wrong-token');
});

test('the Plan page shows the violations of an overlapping split layout', async ({ page }) => {
  await open(page, 'plan');
  await page.getByTestId('plan-input').fill(readFileSync(join(EXAMPLES, 'bad-split-overlap.yaml'), 'utf8'));
  const overlap = page.locator('[data-testid=violation][data-code=split_overlap]');
  await expect(overlap).toBeVisible();
  await expect(overlap.getByTestId('violation-path')).toHaveText(/^roles\.(genrm|rollout)\.models\[0\]/);
  await shot(page, 'plan-violations');
  await page.getByTestId('plan-input').fill(readFileSync(join(EXAMPLES, 'demo.yaml'), 'utf8'));
  await expect(page.getByTestId('plan-ok')).toBeVisible();
  await expect(page.getByTestId('plan-output').getByTestId('gpu')).toHaveCount(16);
  await shot(page, 'plan');
});

test('the Plan page compares the configured and the optimized defer order as uis plan --compare', async ({
  page,
}) => {
  const cli = JSON.parse(
    execFileSync(
      process.execPath,
      [
        join(EXAMPLES, '..', 'apps', 'gateway', 'bin', 'uis-dev.mjs'),
        'plan',
        join(EXAMPLES, 'demo.yaml'),
        '--json',
        '--compare',
      ],
      { encoding: 'utf8' },
    ),
  ) as {
    memory: Array<{
      configured: { bubble_s: number; switches: Array<{ predicted_s: number }> };
      optimized: { bubble_s: number; switches: Array<{ predicted_s: number }> };
    }>;
  };
  const [g] = cli.memory;
  if (g === undefined) throw new Error('uis plan --compare printed no memory plan for the demo');
  await open(page, 'plan');
  await page.getByTestId('plan-input').fill(readFileSync(join(EXAMPLES, 'demo.yaml'), 'utf8'));
  const compare = page.getByTestId('memory-compare');
  await expect(compare.getByTestId('memory-configured-s')).toHaveText(
    `${g.configured.bubble_s.toFixed(2)} s`,
  );
  await expect(compare.getByTestId('memory-optimized-s')).toHaveText(`${g.optimized.bubble_s.toFixed(2)} s`);
  await expect(compare.getByTestId('memory-configured').getByTestId('memory-switch-s')).toHaveText(
    g.configured.switches.map((s) => `${s.predicted_s.toFixed(2)} s`),
  );
  await expect(compare.getByTestId('memory-optimized').getByTestId('memory-switch-s')).toHaveText(
    g.optimized.switches.map((s) => `${s.predicted_s.toFixed(2)} s`),
  );
  await expect(compare.getByTestId('memory-verdict')).toContainText('set schedule.defer.order: optimized');
  await compare.scrollIntoViewIfNeeded();
  await shot(page, 'plan-compare');
});

test('draining a model from the console takes its replicas out of service and discovery', async ({
  page,
  request,
}) => {
  await open(page, 'replicas');
  await page.getByTestId('token-input').fill(ADMIN_TOKEN);
  await page.getByTestId('token-submit').click();
  await expect(page.getByTestId('token-status')).toBeVisible();

  const section = page
    .locator('[data-testid=role-section][data-role=rollout] [data-testid=model-section]')
    .first();
  const model = (await section.getAttribute('data-model')) ?? '';
  // Drain while the model serves, so the change is the drain's doing, not a phase's.
  await expect(section.locator('[data-testid=replica-row][data-state=ready]').first()).toBeVisible({
    timeout: 90_000,
  });
  await section.getByTestId('drain-model').click();
  await expect(page.getByTestId('confirm-dialog')).toBeVisible();
  await page.getByTestId('confirm-ok').click();
  await expect(page.getByTestId('action-result')).toBeVisible();
  await expect(section.locator('[data-testid=replica-row][data-state=ready]')).toHaveCount(0, {
    timeout: 60_000,
  });
  // Every row draining or sleeping, waited for: a drain queued behind the phase loop's onload answers before the
  // pushed state leaves 'onloading', so a one-off read could see the last state before the drain.
  await expect(
    section.locator('[data-testid=replica-row]:not([data-state=draining]):not([data-state=sleeping])'),
  ).toHaveCount(0);
  await expect(section.locator('[data-testid=replica-row][data-direct-eligible=true]')).toHaveCount(0);
  // The drain holds: the demo's phase loop goes on, and the model stays out of service until activated.
  await expect(section.getByTestId('held-badge')).toBeVisible();
  await shot(page, 'replicas-drained');

  const discovery = await request.get('/rollout/engines');
  expect(discovery.ok()).toBe(true);
  const snapshot = (await discovery.json()) as {
    models: Record<
      string,
      { engines: Array<{ engine_id: string; direct_eligible: boolean; state: string }> }
    >;
  };
  const engines = snapshot.models[model]?.engines ?? [];
  expect(engines.length).toBeGreaterThan(0);
  for (const e of engines) {
    expect(e.direct_eligible, `${e.engine_id} in discovery`).toBe(false);
    expect(['draining', 'sleeping']).toContain(e.state);
  }

  // Put the demo back as it was: the hold is lifted (the model onloads now, or with its phase).
  await section.getByTestId('activate-model').click();
  await page.getByTestId('confirm-ok').click();
  // The activation's own toast: the drain's toast above says 'memory released' too.
  await expect(
    page.getByTestId('action-result').filter({ hasText: `Activate rollout/${model}:` }),
  ).toContainText(/activated|released/i);
  await expect(section.getByTestId('held-badge')).toHaveCount(0);
});

test('a finished deferred batch shows how long it queued and how long it ran', async ({ page }) => {
  await open(page, 'batches');
  const committed = page.locator('[data-testid=batch-row][data-state=committed]').first();
  await expect(committed).toBeVisible({ timeout: 120_000 });
  // Columns: batch, kind, state, size, created, queued for, ran for, total.
  const duration = /^(\d+ ms|\d+\.\d+ s|\d+m \d\ds)$/;
  await expect(committed.locator('td').nth(5)).toHaveText(duration);
  await expect(committed.locator('td').nth(6)).toHaveText(duration);
});

test('the events table fits a 1400 px window: a long message wraps and keeps its whole text as a tooltip', async ({
  page,
  request,
}) => {
  // A refused command is audited with its request: a note of 300 characters makes a message of several lines.
  const note = `checked by hand ${'x'.repeat(284)}`;
  const refused = await request.post('/admin/phases/resolve', {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    data: { group: 'actor', phase: 'rollout', note },
  });
  expect(refused.status()).toBeGreaterThanOrEqual(400);
  await page.setViewportSize({ width: 1400, height: 900 });
  await open(page, 'events');
  const message = page.getByTestId('event-message').filter({ hasText: 'checked by hand' }).first();
  await expect(message).toBeVisible({ timeout: 30_000 });
  expect((await message.textContent())?.length ?? 0).toBeGreaterThan(150);
  expect(await message.getAttribute('title')).toBe(await message.textContent());
  const box = await message.boundingBox();
  expect(box!.x + box!.width).toBeLessThanOrEqual(1400);
  expect(box!.height).toBeGreaterThan(30);
  const overflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  expect(overflow).toBe(0);
});

test('screenshots of every page', async ({ page }) => {
  for (const route of ['cluster', 'phases', 'replicas', 'batches', 'events']) {
    await open(page, route);
    await expect(page.getByTestId('connection')).toHaveAttribute('data-connection', 'live');
    await shot(page, `page-${route}`);
  }
  await open(page, 'plan');
  await page.getByTestId('plan-example').selectOption({ index: 1 });
  await expect(page.getByTestId('plan-ok')).toBeVisible();
  await shot(page, 'page-plan');
});
