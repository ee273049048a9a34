// Writes the config file's JSON Schema and its reference page from the zod schema: `pnpm --filter @uis/spec gen`.
// config-json-schema.test.ts fails when either file is out of date.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_SCHEMA_FILE, configJsonSchema } from './src/config-json-schema.ts';
import { configReferenceMarkdown } from './src/config-reference.ts';

export const CONFIG_REFERENCE_FILE = join('..', '..', 'docs', 'config-reference.md');

const schema = configJsonSchema();
writeFileSync(join(import.meta.dirname, CONFIG_SCHEMA_FILE), `${JSON.stringify(schema, null, 2)}\n`);
writeFileSync(join(import.meta.dirname, CONFIG_REFERENCE_FILE), configReferenceMarkdown(schema));
