import { expect, test } from '@playwright/test';
import { shot } from './helpers.ts';

test('/docs renders the OpenAPI document with Swagger UI, loading nothing from outside the gateway', async ({
  page,
  baseURL,
}) => {
  const requests: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto('/docs');
  await expect(page.locator('.swagger-ui .info .title')).toContainText('Unified Inference Service');
  // Every tag section and its operations are listed.
  for (const tag of ['serving', 'openai', 'discovery', 'admin', 'service'])
    await expect(page.locator(`#operations-tag-${tag}`)).toBeVisible();
  expect(await page.locator('.opblock').count()).toBeGreaterThan(30);
  await expect(
    page.locator('.opblock-summary-path', { hasText: '/v1/chat/completions' }).first(),
  ).toBeVisible();
  // One operation opened: its error answers are documented.
  await page.locator('#operations-openai-postV1ChatCompletions .opblock-summary').click();
  await expect(page.locator('#operations-openai-postV1ChatCompletions .responses-table')).toContainText(
    'ambiguous_model',
  );
  await shot(page, 'docs');
  expect(requests.filter((u) => !u.startsWith(baseURL ?? 'http://127.0.0.1'))).toEqual([]);
});
