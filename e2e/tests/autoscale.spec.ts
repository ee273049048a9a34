import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { ADMIN_TOKEN, EXAMPLES, shot } from './helpers.ts';

// The built-in autoscaler of `uis demo`: its rollout model `policy` (2 replicas planned, room for 2 more) is
// scaled up under a burst of requests and back down after it, and the console shows each decision. A demo of its
// own, started here: the shared one runs the RL loop (whose phases put rollout to sleep) and the demo's 60 s
// cooldown. This one is examples/demo.yaml with a 3 s cooldown and a 1 s interval (config, not a hidden flag) and
// no driver.

const root = join(import.meta.dirname, '..', '..');
const scratch = join(import.meta.dirname, '..', 'test-results', 'autoscale');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** examples/demo.yaml with the test's timings for the autoscaler (its thresholds stay the demo's). */
function testConfig(): string {
  const demo = readFileSync(join(EXAMPLES, 'demo.yaml'), 'utf8');
  const line = /autoscale: \{([^}]*)\}/;
  const block = line.exec(demo)?.[1];
  if (block === undefined) throw new Error('examples/demo.yaml has no autoscale block on its rollout model');
  const fast = block.replace(/cooldown_s: \d+/, 'cooldown_s: 3').replace(/interval_s: \d+/, 'interval_s: 1');
  expect(fast).toContain('cooldown_s: 3');
  return demo.replace(line, `autoscale: {${fast}}`);
}

let demo: ChildProcess | undefined;
let base = '';
const output: string[] = [];

test.beforeAll(async () => {
  mkdirSync(scratch, { recursive: true });
  const config = join(scratch, 'demo-autoscale.yaml');
  writeFileSync(config, testConfig());
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  demo = spawn(
    process.execPath,
    ['apps/gateway/bin/uis-dev.mjs', 'demo', '--port', String(port), '--no-driver', '--config', config],
    { cwd: root, env: { ...process.env, UIS_ADMIN_TOKEN: ADMIN_TOKEN }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  for (const s of [demo.stdout, demo.stderr]) s?.on('data', (d: Buffer) => output.push(d.toString()));
  await expect
    .poll(
      async () => {
        if (demo?.exitCode !== null) throw new Error(`the demo exited: ${output.join('').slice(-2000)}`);
        return (await fetch(`${base}/rollout/engines`).catch(() => null))?.status;
      },
      { timeout: 120_000, intervals: [500] },
    )
    .toBe(200);
});

test.afterAll(async () => {
  if (!demo || demo.exitCode !== null) return;
  const exited = new Promise((r) => demo?.once('exit', r));
  demo.kill('SIGTERM');
  await exited;
});

/** The policy model's serving replicas, from discovery. */
async function policyReplicas(): Promise<number> {
  const r = await fetch(`${base}/rollout/engines`);
  const body = (await r.json()) as { models: Record<string, { engines: Array<{ state: string }> }> };
  return (body.models.policy?.engines ?? []).filter((e) => e.state === 'ready').length;
}

test('the autoscaler scales the rollout model up under a burst and down after it, its decisions in the console', async ({
  page,
}) => {
  test.setTimeout(300_000);
  // The plan's 2 replicas serving (discovery answers as soon as the server listens).
  await expect.poll(policyReplicas, { timeout: 60_000, intervals: [250] }).toBe(2);
  await page.goto(`${base}/#/replicas`);
  await page.getByTestId('page-replicas').waitFor({ timeout: 60_000 });
  await page.getByTestId('replica-filter').fill('policy/');
  const panel = page.locator('[data-testid="scale-panel"][data-model="policy"]');
  await panel.locator('summary').click();

  // The burst: 32 clients back to back; each engine runs 4 requests at once, so the rest queue on the engines.
  let bursting = true;
  let served = 0;
  const failures: string[] = [];
  const client = async () => {
    while (bursting) {
      const r = await fetch(`${base}/rollout/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'policy',
          text: `burst ${Math.random()}`,
          sampling_params: { max_new_tokens: 128, ignore_eos: true },
        }),
      });
      if (r.ok) served++;
      else failures.push(`${r.status} ${await r.text()}`);
    }
  };
  const clients = Array.from({ length: 32 }, client);
  try {
    await expect.poll(policyReplicas, { timeout: 120_000, intervals: [500] }).toBeGreaterThan(2);
    const up = panel.locator('[data-testid="autoscale-decision"][data-action="scale_out"]').first();
    await expect(up).toBeVisible();
    await expect(up).toContainText(/2 -> [34] replicas/);
    await expect(up).toContainText(/queue \d+ > 4 x 2 replicas/);
  } finally {
    bursting = false;
    await Promise.all(clients);
  }
  expect(served).toBeGreaterThan(0);
  expect(failures).toEqual([]);

  // Idle now: once the cooldown passed, one replica at a time goes, back to the 2 the plan started.
  await expect.poll(policyReplicas, { timeout: 120_000, intervals: [500] }).toBe(2);
  const down = panel.locator('[data-testid="autoscale-decision"][data-action="scale_in"]').first();
  await expect(down).toBeVisible();
  await expect(down).toContainText(/3 -> 2 replicas/);
  await expect(down).toContainText(/idle: queue 0/);
  // Each decision says when: the newest first, times in UTC.
  await expect(panel.getByTestId('autoscale-decision').first()).toContainText(/\d\d:\d\d:\d\d\.\d{3}/);
  await shot(page, 'page-autoscale');
});
