import { z } from 'zod';
import { UisConfigSchema } from './config.ts';

/** The schema's file inside this package (`@uis/spec/schema.json` in its exports). */
export const CONFIG_SCHEMA_FILE = 'schema/uis-config.schema.json';

/** The JSON Schema (draft 2020-12) of a UIS config file, generated from `UisConfigSchema`: what a user writes,
 * so fields with defaults are optional. Checks that need code (the planner's layout rules, cross-field rules of
 * `superRefine`) are not in it: an editor catches typos and shapes, `uis plan` the rest. */
export function configJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(UisConfigSchema, {
    io: 'input',
    target: 'draft-2020-12',
    unrepresentable: 'throw',
  }) as Record<string, unknown>;
  const { $schema, ...rest } = generated;
  return {
    $schema,
    $id: 'urn:uis:config:1',
    title: 'UIS config file',
    description:
      'Cluster, inference roles and schedule of a Unified Inference Service (uis serve / uis plan --config).',
    ...rest,
  };
}
