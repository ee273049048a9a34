import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { ADMIN_TOKEN } from './helpers.ts';

// The console against its own `uis demo` started with a serving token (the shared demo of the other specs has
// none): it asks for a token, a serving-token sign-in shows everything read-only, the admin token acts. The demo
// listens on 127.0.0.1 and is stopped by this file; the built console comes from the config's webServer step.
const SERVING_TOKEN = 'e2e-serving-token';
const root = join(import.meta.dirname, '..', '..');
let demo: ChildProcess | null = null;
let base = '';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  test.setTimeout(180_000);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ['apps/gateway/bin/uis-dev.mjs', 'demo', '--port', String(port)], {
    cwd: root,
    env: { ...process.env, UIS_ADMIN_TOKEN: ADMIN_TOKEN, UIS_SERVING_TOKEN: SERVING_TOKEN },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  demo = child;
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<never>((_resolve, reject) =>
    child.once('exit', (code) => reject(new Error(`uis demo exited (${code}): ${stderr.slice(-2000)}`))),
  );
  // Ready when it serves the console page (the page itself is public; its reads need a token).
  const ready = expect
    .poll(
      () =>
        fetch(`${base}/`).then(
          (r) => r.ok,
          () => false,
        ),
      { timeout: 170_000 },
    )
    .toBe(true);
  await Promise.race([ready, exited]);
});

test.afterAll(async () => {
  const child = demo;
  if (!child || child.exitCode !== null) return;
  const gone = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await gone;
});

test('with a serving token configured the console asks for a token, and the serving token shows it read-only', async ({
  page,
}) => {
  await page.goto(`${base}/#/replicas`);
  const banner = page.getByTestId('connection-banner');
  await expect(banner).toHaveAttribute('data-kind', 'needs-token');
  await expect(banner).toContainText('needs a token');
  await expect(page.getByTestId('connection')).toHaveAttribute('data-connection', 'locked');
  await expect(page.getByTestId('page-replicas')).toHaveCount(0);

  await page.getByTestId('token-input').fill('not-the-token');
  await page.getByTestId('token-submit').click();
  await expect(page.getByTestId('token-error')).toContainText(/refused/i);

  await page.getByTestId('token-input').fill(SERVING_TOKEN);
  await page.getByTestId('token-submit').click();
  await expect(page.getByTestId('token-status')).toHaveAttribute('data-permission', 'serving');
  await expect(page.getByTestId('page-replicas')).toBeVisible({ timeout: 60_000 });
  // The live stream runs with the serving token (passed as connection params).
  await expect(page.getByTestId('connection')).toHaveAttribute('data-connection', 'live');
  const drain = page.getByTestId('drain-model').first();
  await expect(drain).toBeDisabled();
  await expect(drain).toHaveAttribute('title', 'needs the admin token');
  await expect(page.getByTestId('restart-replica').first()).toBeDisabled();
  await page.goto(`${base}/#/phases`);
  await expect(page.getByTestId('advance-phase').first()).toBeDisabled();

  // The admin token (same sign-in) acts again: the buttons are offered and ask for confirmation.
  await page.getByTestId('token-forget').click();
  await expect(page.getByTestId('connection-banner')).toHaveAttribute('data-kind', 'needs-token');
  await page.getByTestId('token-input').fill(ADMIN_TOKEN);
  await page.getByTestId('token-submit').click();
  await expect(page.getByTestId('token-status')).toHaveAttribute('data-permission', 'admin');
  const advance = page.getByTestId('advance-phase').first();
  await expect(advance).toBeEnabled();
  await advance.click();
  await expect(page.getByTestId('confirm-dialog')).toBeVisible();
  await page.getByTestId('confirm-cancel').click();
});
