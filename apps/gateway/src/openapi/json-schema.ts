import { createHash } from 'node:crypto';
import { z } from 'zod';

export type JsonSchema = Record<string, unknown>;

/** Definitions hoisted out of converted schemas: OpenAPI resolves `#/...` against the document root, so a schema's
 * own `$defs` must live under `components.schemas`. */
export type SchemaDefs = Record<string, JsonSchema>;

/** A zod schema as the JSON Schema (2020-12, the dialect of OpenAPI 3.1) of what a client sends (`input`) or gets
 * (`output`). Shapes JSON cannot express (a refinement's code) are left open rather than refused. Recursive parts
 * (e.g. a JSON value) land in `defs` under names taken from their content, so equal ones are shared. */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output', defs: SchemaDefs = {}): JsonSchema {
  const out = z.toJSONSchema(schema, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
    reused: 'inline',
  }) as JsonSchema;
  delete out.$schema;
  const local = out.$defs as Record<string, JsonSchema> | undefined;
  if (local === undefined) return out;
  delete out.$defs;
  const tag = createHash('sha256').update(JSON.stringify(local)).digest('hex').slice(0, 8);
  const rename = (value: unknown): unknown =>
    JSON.parse(
      JSON.stringify(value).replace(/"#\/\$defs\/([^"]+)"/g, (_m, key: string) =>
        JSON.stringify(`#/components/schemas/Def_${tag}_${key.replace(/[^A-Za-z0-9_]/g, '')}`),
      ),
    );
  for (const [key, def] of Object.entries(local))
    defs[`Def_${tag}_${key.replace(/[^A-Za-z0-9_]/g, '')}`] = rename(def) as JsonSchema;
  return rename(out) as JsonSchema;
}
