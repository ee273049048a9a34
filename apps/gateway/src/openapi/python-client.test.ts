import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { commandRoutes } from '@uis/control-plane';
import { describe, expect, it } from 'vitest';
import type { JsonSchema } from './json-schema.ts';
import { currentPythonClient, PYTHON_PACKAGE, pythonClientFiles } from './python-client.ts';

const ROOT = join(import.meta.dirname, '../../../..');

/** A document of one admin command answering `result`. */
const oneCommand = (result: JsonSchema, schemas: Record<string, JsonSchema> = {}) => ({
  paths: {
    '/admin/x': {
      get: {
        operationId: 'get_x',
        summary: 'x',
        parameters: [],
        'x-uis-permission': 'serving',
        'x-uis-idempotent': false,
        responses: {
          '200': {
            content: { 'application/json': { schema: { type: 'object', properties: { result } } } },
          },
        },
      },
    },
  },
  components: { schemas },
});

describe('the Python client generated from the command table', () => {
  it('is committed as the generator writes it now (after changing the table: pnpm gen:python)', () => {
    const files = currentPythonClient();
    expect(files.map((f) => f.path)).toEqual([
      `${PYTHON_PACKAGE}/_models_gen.py`,
      `${PYTHON_PACKAGE}/_commands_gen.py`,
    ]);
    for (const f of files)
      expect(readFileSync(join(ROOT, f.path), 'utf8'), `${f.path} is stale: run pnpm gen:python`).toBe(
        f.text,
      );
  });

  it("has a call, a method and an async method for every command, under the table's name", () => {
    const commands = currentPythonClient()[1]!.text;
    for (const { name } of commandRoutes()) {
      expect(commands).toContain(`\ndef ${name}_call(`);
      expect(commands).toContain(`\n    def ${name}(`);
      expect(commands).toContain(`\n    async def ${name}(`);
    }
    // The barrier wait is given its timeout and not retried; a keyword field keeps its wire name.
    expect(commands).toMatch(/def wait_barrier_call\([^)]*timeout_s: float = 600\)/);
    expect(commands).toContain('timeout=timeout_s + WAIT_MARGIN_S,\n        retry=False,');
    expect(currentPythonClient()[0]!.text).toContain('from_: str | None = Field(alias="from")');
  });

  it('refuses what it cannot write as Python rather than guessing', () => {
    const shape = (extra: string) => ({
      type: 'object',
      title: 'Thing',
      properties: { [extra]: { type: 'string' } },
    });
    expect(() =>
      pythonClientFiles(oneCommand({ type: 'object', properties: { a: shape('x'), b: shape('y') } })),
    ).toThrow('two different shapes are both named Thing');
    expect(() => pythonClientFiles(oneCommand({ type: 'array', items: { type: 'string' } }))).toThrow(
      "an answer's result must be null or an object",
    );
    expect(() =>
      pythonClientFiles(oneCommand({ $ref: '#/components/schemas/Tree' }, { Tree: { type: 'object' } })),
    ).toThrow('only the JSON value is shared by reference');
  });
});
