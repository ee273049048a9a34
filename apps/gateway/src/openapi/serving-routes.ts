import { AbortRequestInputSchema, AbortResultSchema } from '@uis/manager';
import {
  ChatCompletionChunkSchema,
  ChatCompletionRequestSchema,
  ChatCompletionResponseSchema,
  CompletionChunkSchema,
  CompletionRequestSchema,
  CompletionResponseSchema,
  GenerateReqInputSchema,
  GenerateResponseSchema,
  GenerateStreamChunkSchema,
} from '@uis/sglang-engine';
import { DiscoverySnapshotSchema, type ErrorCode, ReplicaStateSchema } from '@uis/spec';
import { z } from 'zod';
import { EngineQuerySchema, HealthQuerySchema } from '../gateway/read-routes.ts';

/** How one route of the serving side is documented: the zod schemas it is served with, and its error codes. */
export interface ServingRouteDoc {
  method: 'get' | 'post';
  /** OpenAPI path; `{role}` is one of the configured roles. */
  path: string;
  summary: string;
  tag: 'serving' | 'discovery' | 'openai' | 'service' | 'elastic';
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The 200 answer (JSON), and the event stream's `data:` payload when `stream: true` is asked. */
  answer?: z.ZodType;
  stream?: z.ZodType;
  /** A non-JSON 200 answer. */
  text?: { type: string; description: string };
  errors: readonly ErrorCode[];
  /** OpenAI routes answer OpenAI's error object (with our code, path and details kept). */
  openai?: boolean;
  auth: 'serving' | 'admin' | 'none';
}

const RoutingFields = z.object({
  model: z
    .string()
    .optional()
    .describe('Model id, alias or served name (else route_key, else the default model)'),
  route_key: z
    .string()
    .optional()
    .describe("A key the role's routing maps to a model (e.g. OPD's data source)"),
});

const HealthAnswerSchema = z.object({
  status: z
    .enum(['healthy', 'unhealthy'])
    .describe(
      "Relax's status words: healthy when every model can serve now (a role asleep in another phase is not)",
    ),
  service: z.string().describe('The role (Relax names it the service)'),
  gateway_status: z.literal('healthy').describe('The gateway itself answers'),
  instances: z.record(z.string(), z.object({ status: z.enum(['healthy', 'unhealthy']) })),
  role: z.string(),
  phase: z.string().nullable(),
  topology_revision: z.number().int(),
  registry_epoch: z.string().nullable(),
  can_serve: z.boolean(),
  models: z.record(
    z.string(),
    z.object({
      state: ReplicaStateSchema,
      can_serve: z.boolean(),
      replicas: z.number().int(),
      eligible_replicas: z.number().int(),
      weight_version: z.string().nullable(),
      reason: z.string().optional(),
      retry_after_s: z.number().optional(),
    }),
  ),
});

const GenrmInstanceMetricsSchema = z.object({
  model_path: z.string(),
  num_gpus: z.number().int(),
  num_engines: z.number().int(),
});
const GenrmMetricsAnswerSchema = GenrmInstanceMetricsSchema.partial().extend({
  service: z.string(),
  instances: z.record(z.string(), GenrmInstanceMetricsSchema),
});

const ModelEntrySchema = z.looseObject({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string(),
  root: z.string().describe('The served model name (for an alias: the model it names)'),
  state: ReplicaStateSchema.optional(),
  alias_of: z.string().optional(),
  role: z.string().optional().describe('Root /v1/models only: the role serving the model'),
});
const ModelListAnswerSchema = z.object({ object: z.literal('list'), data: z.array(ModelEntrySchema) });

const SERVE_ERRORS: readonly ErrorCode[] = [
  'invalid_json',
  'invalid_body',
  'model_required',
  'unauthorized',
  'unknown_model',
  'model_not_served',
  'unknown_route_key',
  'unknown_role',
  'body_too_large',
  'engine_unreachable',
  'engine_bad_response',
  'model_not_ready',
  'no_eligible_replica',
  'no_replica_at_version',
  'engine_timeout',
];
const ROOT_ERRORS: readonly ErrorCode[] = [
  ...SERVE_ERRORS.filter((c) => c !== 'unknown_role'),
  'ambiguous_model',
];

const chat = {
  body: ChatCompletionRequestSchema,
  answer: ChatCompletionResponseSchema,
  stream: ChatCompletionChunkSchema,
};
const completions = {
  body: CompletionRequestSchema,
  answer: CompletionResponseSchema,
  stream: CompletionChunkSchema,
};

/** Every serving, discovery and service route of the gateway (the admin routes come from the command table). */
export const SERVING_ROUTES: readonly ServingRouteDoc[] = [
  {
    method: 'get',
    path: '/{role}/engines',
    summary:
      "Discovery snapshot, with Relax's legacy fields beside it by default (long-poll with wait_revision + registry_epoch; schema=1: the legacy shape alone; schema=2: the schema-2 fields alone)",
    tag: 'discovery',
    query: EngineQuerySchema,
    answer: DiscoverySnapshotSchema,
    errors: ['invalid_query', 'unauthorized', 'unknown_role'],
    auth: 'serving',
  },
  {
    method: 'get',
    path: '/{role}/health',
    summary: "The role's health: 200 while the process lives, with each model's state and retry guidance",
    tag: 'discovery',
    query: HealthQuerySchema,
    answer: HealthAnswerSchema,
    errors: ['invalid_query', 'unauthorized', 'unknown_role'],
    auth: 'serving',
  },
  {
    method: 'get',
    path: '/genrm/metrics',
    summary: "Relax GenRM's metrics: per instance (model) its model path, GPUs and engines as planned",
    tag: 'discovery',
    answer: GenrmMetricsAnswerSchema,
    errors: ['unauthorized'],
    auth: 'serving',
  },
  {
    method: 'get',
    path: '/{role}/v1/models',
    summary: "The role's models and aliases (OpenAI model list)",
    tag: 'openai',
    answer: ModelListAnswerSchema,
    errors: ['unauthorized', 'unknown_role'],
    auth: 'serving',
  },
  {
    method: 'post',
    path: '/{role}/generate',
    summary: 'SGLang /generate on a replica chosen by the routing rules (model and route_key are removed)',
    tag: 'serving',
    body: GenerateReqInputSchema.and(RoutingFields),
    answer: GenerateResponseSchema,
    stream: GenerateStreamChunkSchema,
    errors: SERVE_ERRORS,
    auth: 'serving',
  },
  {
    method: 'post',
    path: '/{role}/abort_request',
    summary:
      "SGLang's abort_request through the gateway: {rid} at the replica that holds it (404 unknown_rid when no request with it is in flight here), or {abort_all: true, model?} at every running replica; each aborted caller gets its partial output (finish_reason abort)",
    tag: 'serving',
    body: AbortRequestInputSchema,
    answer: AbortResultSchema,
    errors: [
      'invalid_json',
      'invalid_body',
      'unauthorized',
      'unknown_role',
      'unknown_rid',
      'unknown_model',
      'engine_unreachable',
      'engine_timeout',
      'engine_http_error',
    ],
    auth: 'serving',
  },
  ...(['/{role}/v1/chat/completions', '/{role}/chat/completions'] as const).map((path) => ({
    method: 'post' as const,
    path,
    summary: 'OpenAI chat completions, plain or streamed (SSE relayed unbuffered)',
    tag: 'openai' as const,
    ...chat,
    errors: SERVE_ERRORS,
    openai: true,
    auth: 'serving' as const,
  })),
  ...(['/{role}/v1/completions', '/{role}/completions'] as const).map((path) => ({
    method: 'post' as const,
    path,
    summary: 'OpenAI completions (one prompt: text or token ids), plain or streamed',
    tag: 'openai' as const,
    ...completions,
    errors: SERVE_ERRORS,
    openai: true,
    auth: 'serving' as const,
  })),
  {
    method: 'get',
    path: '/v1/models',
    summary: "Every role's models, each naming its role",
    tag: 'openai',
    answer: ModelListAnswerSchema,
    errors: ['unauthorized'],
    openai: true,
    auth: 'serving',
  },
  {
    method: 'post',
    path: '/v1/chat/completions',
    summary:
      'OpenAI chat at the root: the role is the one serving the model name (400 ambiguous_model if several)',
    tag: 'openai',
    ...chat,
    errors: ROOT_ERRORS,
    openai: true,
    auth: 'serving',
  },
  {
    method: 'post',
    path: '/v1/completions',
    summary: 'OpenAI completions at the root: the role is the one serving the model name',
    tag: 'openai',
    ...completions,
    errors: ROOT_ERRORS,
    openai: true,
    auth: 'serving',
  },
  {
    method: 'get',
    path: '/healthz',
    summary: 'The process lives: its roles',
    tag: 'service',
    answer: z.object({ status: z.literal('ok'), roles: z.array(z.string()) }),
    errors: [],
    auth: 'none',
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics',
    tag: 'service',
    text: { type: 'text/plain', description: 'Prometheus text exposition format' },
    errors: [],
    auth: 'none',
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document',
    tag: 'service',
    text: { type: 'application/json', description: 'The OpenAPI 3.1 document' },
    errors: [],
    auth: 'none',
  },
  {
    method: 'get',
    path: '/docs',
    summary: 'This document rendered (Swagger UI, served from the gateway: no internet needed)',
    tag: 'service',
    text: { type: 'text/html', description: 'The API reference page' },
    errors: [],
    auth: 'none',
  },
];
