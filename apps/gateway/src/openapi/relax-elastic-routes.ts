import { ScaleInInputSchema, ScaleOutInputSchema } from '@uis/control-plane';
import { type ErrorCode, ScaleOperationSchema, ScaleStateSchema } from '@uis/spec';
import { z } from 'zod';
import type { ServingRouteDoc } from './serving-routes.ts';

/** Relax's answer to a scale request (accepted, NOOP, or cancelled). */
const ScaleAnswerSchema = z.object({ request_id: z.string(), status: ScaleStateSchema, message: z.string() });
const ScaleListSchema = z.object({
  requests: z.array(ScaleOperationSchema),
  total_count: z.number().int(),
  model_name: z.string().nullable(),
  status_filter: ScaleStateSchema.nullable(),
});
const ListQuery = z.object({ model_name: z.string().optional(), status: ScaleStateSchema.optional() });
const CancelManyBody = z.object({
  model_name: z.string().optional(),
  status_filter: ScaleStateSchema.optional(),
  dry_run: z.boolean().optional(),
});
const CancelManyAnswer = z.object({
  dry_run: z.boolean(),
  request_ids: z.array(z.string()),
  cancelled_count: z.number().int(),
  message: z.string(),
});

const ERRORS: readonly ErrorCode[] = ['invalid_body', 'invalid_json', 'unauthorized', 'unknown_role'];
const elastic = { tag: 'elastic', auth: 'admin' } as const;

/** Relax's elastic-rollout API under each role (`src/gateway/relax-elastic.ts`), each the admin command of its
 * name through another door. */
export const RELAX_ELASTIC_ROUTES: readonly ServingRouteDoc[] = [
  {
    ...elastic,
    method: 'post',
    path: '/{role}/scale_out',
    summary:
      "Relax's scale-out: num_replicas (absolute target) or engine_urls; answers request_id, status, message",
    body: ScaleOutInputSchema,
    answer: ScaleAnswerSchema,
    errors: [
      ...ERRORS,
      'invalid_replicas',
      'unknown_model',
      'not_elastic',
      'no_reserved_bundles',
      'model_operation_in_progress',
    ],
  },
  {
    ...elastic,
    method: 'get',
    path: '/{role}/scale_out',
    summary: "Relax's list of scale-out requests, by model_name and status",
    query: ListQuery,
    answer: ScaleListSchema,
    errors: ['invalid_query', 'unauthorized', 'unknown_role'],
  },
  {
    ...elastic,
    method: 'get',
    path: '/{role}/scale_out/{id}',
    summary: 'One scale-out request: its status, engines, failures and weight version',
    answer: ScaleOperationSchema,
    errors: ['unauthorized', 'unknown_role', 'unknown_scale_request'],
  },
  {
    ...elastic,
    method: 'post',
    path: '/{role}/scale_out/{id}/cancel',
    summary: 'Cancel a running scale-out: every replica it added is stopped and removed',
    answer: ScaleAnswerSchema,
    errors: ['unauthorized', 'unknown_role', 'unknown_scale_request', 'scale_not_cancellable'],
  },
  {
    ...elastic,
    method: 'post',
    path: '/{role}/scale_out_cancel',
    summary: 'Cancel every running scale-out that matches (model_name, status_filter); dry_run names them',
    body: CancelManyBody,
    answer: CancelManyAnswer,
    errors: [...ERRORS, 'invalid_query'],
  },
  {
    ...elastic,
    method: 'post',
    path: '/{role}/scale_in',
    summary: "Relax's scale-in: num_replicas to keep or engine_urls to remove; LIFO, drained, force, dry_run",
    body: ScaleInInputSchema,
    answer: ScaleAnswerSchema,
    errors: [
      ...ERRORS,
      'invalid_replicas',
      'unknown_model',
      'unknown_engine',
      'scale_in_protected',
      'model_operation_in_progress',
    ],
  },
  {
    ...elastic,
    method: 'get',
    path: '/{role}/scale_in',
    summary: "Relax's list of scale-in requests, by model_name and status",
    query: ListQuery,
    answer: ScaleListSchema,
    errors: ['invalid_query', 'unauthorized', 'unknown_role'],
  },
  {
    ...elastic,
    method: 'get',
    path: '/{role}/scale_in/{id}',
    summary: 'One scale-in request: its status and the engines it removes',
    answer: ScaleOperationSchema,
    errors: ['unauthorized', 'unknown_role', 'unknown_scale_request'],
  },
];
