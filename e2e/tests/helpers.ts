import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from '@playwright/test';

export const ADMIN_TOKEN = 'e2e-token';
/** Where `shot` writes: the run's untracked output, so tests leave the tree as they found it. The committed ones
 * (e2e/screenshots/, kept as issues ask) are refreshed only when asked: UIS_E2E_SCREENSHOTS=refresh. */
export const SCREENSHOTS =
  process.env.UIS_E2E_SCREENSHOTS === 'refresh'
    ? join(import.meta.dirname, '..', 'screenshots')
    : join(import.meta.dirname, '..', 'test-results', 'screenshots');
export const EXAMPLES = join(import.meta.dirname, '..', '..', 'examples');

export async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

/** Opens a page of the console and waits until the live state has arrived. */
export async function open(page: Page, route: string): Promise<void> {
  await page.goto(`/#/${route}`);
  await page.getByTestId(`nav-${route}`).waitFor();
  if (route !== 'plan') await page.getByTestId(`page-${route}`).waitFor({ timeout: 60_000 });
}
