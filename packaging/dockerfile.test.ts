// No image builder can run in CI here (the node base images live in a registry this machine cannot reach, see
// docs/container.md), so the Dockerfile is linted and its promises are checked as text.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .filter((l) => /^[A-Z]+\s/.test(l));

describe('Dockerfile', () => {
  it('dockerfilelint finds no issue', () => {
    const lint = join(import.meta.dirname, 'node_modules', '.bin', 'dockerfilelint');
    const r = spawnSync(lint, ['-o', 'json', join(root, 'Dockerfile')], { encoding: 'utf8' });
    const report = JSON.parse(r.stdout);
    expect(report.files[0].issues).toEqual([]);
    expect(r.status).toBe(0);
  });

  it('is multi-stage: the runtime image copies the build from the build stage', () => {
    expect(instructions.filter((l) => l.startsWith('FROM ')).length).toBeGreaterThanOrEqual(2);
    expect(instructions.some((l) => /^COPY --from=build /.test(l))).toBe(true);
  });

  it('runs as a non-root user, set after the last root step', () => {
    const users = instructions.filter((l) => l.startsWith('USER '));
    expect(users.at(-1)).toMatch(/^USER (?!root\b|0\b)\S+/);
    const lastUser = instructions.lastIndexOf(users.at(-1)!);
    expect(instructions.slice(lastUser).some((l) => /^RUN /.test(l))).toBe(false);
  });

  it('builds the console in and starts the compiled uis', () => {
    expect(dockerfile).toMatch(/--filter=@uis\/console/);
    expect(dockerfile).toMatch(/COPY --from=build \S+ \/app\/console\/dist/);
    const entry = instructions.find((l) => l.startsWith('ENTRYPOINT '))!;
    expect(entry).toContain('/app/gateway/bin/uis.mjs');
    expect(entry).not.toMatch(/tsx|uis-dev/);
  });
});
