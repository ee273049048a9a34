import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CONFIG_SCHEMA_FILE, configJsonSchema } from './config-json-schema.ts';
import { configReferenceMarkdown } from './config-reference.ts';

const pkg = join(import.meta.dirname, '..');
const examples = join(pkg, '..', '..', 'examples');
const committed = JSON.parse(readFileSync(join(pkg, CONFIG_SCHEMA_FILE), 'utf8'));
const SCHEMA_LINE = '# yaml-language-server: $schema=../packages/spec/schema/uis-config.schema.json';

/** A real JSON Schema validator (Ajv, draft 2020-12, strict), not zod: what editors and other tools apply. */
const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
addFormats.default(ajv);
const validate = ajv.compile(committed);

describe('the config JSON Schema', () => {
  it('is the one generated from the zod schema (run `pnpm --filter @uis/spec gen` after changing it)', () => {
    expect(committed).toEqual(configJsonSchema());
  });

  it('the reference page is generated from it (docs/config-reference.md)', () => {
    const page = readFileSync(join(pkg, '..', '..', 'docs', 'config-reference.md'), 'utf8');
    expect(page).toBe(configReferenceMarkdown(committed));
  });

  const files = readdirSync(examples).filter((f) => f.endsWith('.yaml'));
  it('there are examples to check', () => {
    expect(files.length).toBeGreaterThanOrEqual(5);
  });

  it.for(files)('examples/%s names the schema and validates against it', (file) => {
    const text = readFileSync(join(examples, file), 'utf8');
    expect(text.split('\n')[0]).toBe(SCHEMA_LINE);
    const ok = validate(parse(text));
    expect(validate.errors ?? [], file).toEqual([]);
    expect(ok).toBe(true);
  });

  it.for([
    ['a misspelt field', { cluster: { nodes: [{ name: 'n', gpus: 8 }] }, roles: {}, rols: {} }, '', 'rols'],
    [
      'a string where a number goes',
      { cluster: { nodes: [{ name: 'n', gpus: '8' }] }, roles: {} },
      '/cluster/nodes/0/gpus',
      '',
    ],
    ['no cluster', { roles: {} }, '', 'cluster'],
    [
      'an unknown deployment mode',
      {
        cluster: { nodes: [{ name: 'n', gpus: 8 }] },
        roles: { rollout: { deployment: { mode: 'shared' }, models: [] } },
      },
      '/roles/rollout/deployment/mode',
      '',
    ],
  ] as const)('rejects %s, naming where', ([, doc, instancePath, property]) => {
    expect(validate(doc)).toBe(false);
    const where = (validate.errors ?? []).map((e) => ({
      instancePath: e.instancePath,
      property: String(e.params.additionalProperty ?? e.params.missingProperty ?? ''),
    }));
    expect(where).toContainEqual({ instancePath, property });
  });
});
