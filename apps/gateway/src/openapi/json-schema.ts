import { z } from 'zod';

export type JsonSchema = Record<string, unknown>;

/** A zod schema as the JSON Schema (2020-12, the dialect of OpenAPI 3.1) of what a client sends (`input`) or gets
 * (`output`). Shapes JSON cannot express (a refinement's code) are left open rather than refused. */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const out = z.toJSONSchema(schema, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
    reused: 'inline',
  }) as JsonSchema;
  delete out.$schema;
  return out;
}
