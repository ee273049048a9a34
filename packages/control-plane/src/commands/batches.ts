import { BatchKindSchema, BatchStateSchema, UisError } from '@uis/spec';
import { z } from 'zod';
import { submitBatch } from '../submit-batch.ts';
import { admin, None, servingRead } from './common.ts';
import { defineCommand } from './define.ts';
import { BatchInfoSchema, SampleOutputSchema } from './wire.ts';

const Batch = z.strictObject({ id: z.string().min(1) });

/** Deferred batches: submitted, listed, and read back page by page once committed. */
const MAX_RESULTS = 1000;
export const batchCommands = {
  submit_batch: defineCommand({
    ...admin,
    name: 'submit_batch',
    summary: 'Create, fill and seal a deferred batch (GenRM messages or teacher token ids per sample)',
    method: 'POST',
    path: '/batches',
    params: None,
    input: z.strictObject({
      kind: BatchKindSchema,
      model: z.string().min(1).nullish(),
      /** `{sample_id, input}`; each input is checked against the batch kind's schema. */
      samples: z.array(z.json()).min(1),
    }),
    output: BatchInfoSchema,
    // A batch may hold thousands of samples: the audit record and its log line keep their count, the batch store
    // keeps the samples.
    audit: {
      subject: ({ input }) => input.kind,
      request: ({ input }) => ({
        kind: input.kind,
        model: input.model ?? null,
        samples: input.samples.length,
      }),
    },
    handler: (plane, { input }) => submitBatch(plane, input.kind, input.model ?? null, input.samples),
  }),
  list_batches: defineCommand({
    ...servingRead,
    name: 'list_batches',
    summary: 'Deferred batches, by state and role',
    method: 'GET',
    path: '/batches',
    params: None,
    input: z.object({
      state: BatchStateSchema.optional(),
      role: z.string().min(1).optional(),
    }),
    output: z.object({ batches: z.array(BatchInfoSchema) }),
    handler: (plane, { input }) => ({ batches: plane.store.list(input) }),
  }),
  get_batch: defineCommand({
    ...servingRead,
    name: 'get_batch',
    summary: 'One batch and, once committed, its outputs page by page (`after` a sample_id, at most `limit`)',
    method: 'GET',
    path: '/batches/:id',
    params: Batch,
    input: z.object({
      after: z.string().min(1).optional(),
      limit: z.coerce.number().int().positive().max(MAX_RESULTS).default(MAX_RESULTS),
    }),
    output: z
      .object({
        batch: BatchInfoSchema,
        /** Present once the batch is committed. */
        samples: z
          .array(
            z
              .object({ sample_id: z.string(), output: SampleOutputSchema.nullable() })
              .meta({ title: 'BatchSample' }),
          )
          .optional(),
        /** The cursor of the next page; null at the end (and before the batch is committed). */
        next_after: z.string().nullable(),
      })
      .meta({ title: 'BatchPage' }),
    handler: (plane, { params, input }) => {
      const batch = plane.store.get(params.id);
      if (batch.state !== 'committed') return { batch, next_after: null };
      const all = plane.store.samples(params.id);
      const start = input.after === undefined ? 0 : all.findIndex((s) => s.sample_id === input.after) + 1;
      if (start === 0 && input.after !== undefined)
        throw new UisError({
          code: 'invalid_input',
          path: 'query.after',
          message: `batch ${params.id} has no sample ${JSON.stringify(input.after)}; pass the last sample_id of a page`,
        });
      const page = all.slice(start, start + input.limit);
      const more = start + page.length < all.length;
      return {
        batch,
        samples: page.map((s) => ({ sample_id: s.sample_id, output: s.output })) as never,
        next_after: more ? (page.at(-1)?.sample_id ?? null) : null,
      };
    },
  }),
};
