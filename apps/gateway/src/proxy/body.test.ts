import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { quickFields, ServingFieldsSchema } from './body.ts';

const anyValue = fc.oneof(
  fc.constant(undefined),
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.string({ maxLength: 3 }),
  fc.array(fc.oneof(fc.string({ maxLength: 2 }), fc.integer()), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 2 }), fc.integer(), { maxKeys: 2 }),
);

describe('quickFields', () => {
  it('accepts exactly what ServingFieldsSchema accepts, with the same result', () => {
    fc.assert(
      fc.property(anyValue, anyValue, anyValue, anyValue, (model, route_key, stream, rid) => {
        const obj = { model, route_key, stream, rid, text: 'x' };
        const quick = quickFields(obj);
        const zod = ServingFieldsSchema.safeParse({ model, route_key, stream, rid });
        expect(quick !== undefined).toBe(zod.success);
        if (quick !== undefined && zod.success) {
          // zod drops keys whose value is undefined only when absent; compare defined entries.
          const defined = (o: object) =>
            Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
          expect(defined(quick)).toEqual(defined(zod.data));
        }
      }),
      { numRuns: 2000 },
    );
  });
});
