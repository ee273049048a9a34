import { ERROR_CODES, type ErrorCode, statusOf } from '@uis/spec';
import type { z } from 'zod';
import { type JsonSchema, type SchemaDefs, jsonSchemaOf as toJsonSchema } from './json-schema.ts';
import { RELAX_ELASTIC_ROUTES } from './relax-elastic-routes.ts';
import { SERVING_ROUTES, type ServingRouteDoc } from './serving-routes.ts';

/** One admin command as an HTTP route (the command table's `commandRoutes()` of @uis/control-plane). */
export interface AdminRouteDoc {
  name: string;
  summary: string;
  method: 'GET' | 'POST';
  /** `/admin/roles/{role}/drain` */
  path: string;
  params: readonly string[];
  permission: 'admin' | 'serving' | 'public';
  idempotent: boolean;
  audited: boolean;
  /** A wait: the input field (seconds) the call may block for. */
  waitsUpTo?: string | null;
  command: { params: z.ZodObject; input: z.ZodType; output: z.ZodType };
}

export interface OpenApiOptions {
  /** The configured roles (the `{role}` parameter's values). */
  roles: readonly string[];
  admin: readonly AdminRouteDoc[];
  version?: string;
}

const ERROR_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: {
          type: 'string',
          enum: Object.keys(ERROR_CODES),
          description: 'Stable code (the error table)',
        },
        message: { type: 'string', description: 'What happened and what to change' },
        path: {
          type: 'string',
          description: 'The input at fault: `body.model`, `query.wait_revision`, `role`',
        },
        details: { description: 'Structured details (e.g. retry_after_s, the names that exist)' },
      },
    },
  },
};

/** OpenAI's error object, with our code, path and details kept. */
const OPENAI_ERROR_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'type', 'code'],
      properties: {
        message: { type: 'string' },
        type: {
          type: 'string',
          description: 'invalid_request_error, authentication_error, server_error, ...',
        },
        param: { type: ['string', 'null'], description: 'The body field at fault (`model`)' },
        code: { type: 'string', enum: Object.keys(ERROR_CODES) },
        path: { type: 'string' },
        details: {},
      },
    },
  },
};

function errorResponses(codes: readonly ErrorCode[], openai: boolean): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = statusOf(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const ref = { $ref: `#/components/schemas/${openai ? 'OpenAIError' : 'Error'}` };
  const out: Record<string, unknown> = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = {
      description: list.map((c) => `\`${c}\``).join(', '),
      ...(status === 503 || status === 429
        ? { headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } } }
        : {}),
      content: { 'application/json': { schema: ref } },
    };
  }
  return out;
}

/** The query (or path) parameters of an object schema, one per property. */
function parameters(schema: z.ZodType, where: 'query' | 'path'): unknown[] {
  const json = jsonSchemaOf(schema, 'input');
  const props = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required ?? []) as string[]);
  return Object.entries(props).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    ...(typeof s.description === 'string' ? { description: s.description } : {}),
    schema: s,
  }));
}

function servingOperation(r: ServingRouteDoc, roles: readonly string[]): Record<string, unknown> {
  const params: unknown[] = [];
  if (r.path.includes('{role}'))
    params.push({ name: 'role', in: 'path', required: true, schema: { type: 'string', enum: [...roles] } });
  if (r.path.includes('{id}'))
    params.push({ name: 'id', in: 'path', required: true, schema: { type: 'string' } });
  if (r.query) params.push(...parameters(r.query, 'query'));
  const content: Record<string, unknown> = {};
  if (r.answer) content['application/json'] = { schema: jsonSchemaOf(r.answer, 'output') };
  if (r.stream)
    content['text/event-stream'] = {
      schema: {
        ...jsonSchemaOf(r.stream, 'output'),
        description: 'With `stream: true`: server-sent events whose `data:` is this object, then `[DONE]`',
      },
    };
  if (r.text) content[r.text.type] = { schema: { type: 'string', description: r.text.description } };
  const errors = r.path.includes('{role}') ? r.errors : r.errors.filter((c) => c !== 'unknown_role');
  return {
    operationId: `${r.method}${r.path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
    summary: r.summary,
    tags: [r.tag],
    security: r.auth === 'serving' ? [{}, { servingToken: [] }] : r.auth === 'admin' ? SECURITY.admin : [],
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(r.body
      ? {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: jsonSchemaOf(r.body, 'input') } },
          },
        }
      : {}),
    responses: { '200': { description: 'OK', content }, ...errorResponses(errors, r.openai === true) },
  };
}

const ADMIN_ERRORS: readonly ErrorCode[] = [
  'invalid_input',
  'invalid_json',
  'unauthorized',
  'unknown_role',
  'unknown_model',
  'operation_id_conflict',
  'body_too_large',
];

/** Who may call a command, as OpenAPI security requirements: the admin token; a read takes the serving token or
 * the admin token, and nothing when no serving token is configured (`{}`); a public command nothing. */
const SECURITY: Record<AdminRouteDoc['permission'], unknown[]> = {
  admin: [{ adminToken: [] }],
  serving: [{}, { servingToken: [] }, { adminToken: [] }],
  public: [],
};

function adminOperation(r: AdminRouteDoc): Record<string, unknown> {
  const { command } = r;
  const params: unknown[] = r.params.length > 0 ? parameters(command.params, 'path') : [];
  if (r.method === 'GET') params.push(...parameters(command.input, 'query'));
  if (r.idempotent)
    params.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description: 'Operation id: a repeat returns the first result; the same id with another request is 409',
      schema: { type: 'string', minLength: 1, maxLength: 200 },
    });
  const envelope = {
    type: 'object',
    required: ['ok', 'operation_id', 'result'],
    properties: {
      ok: { const: true },
      operation_id: { type: ['string', 'null'] },
      result: jsonSchemaOf(command.output, 'output'),
    },
  };
  return {
    operationId: r.name,
    summary: r.summary,
    tags: ['admin'],
    security: SECURITY[r.permission],
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(r.method === 'POST'
      ? {
          requestBody: {
            required: false,
            content: { 'application/json': { schema: jsonSchemaOf(command.input, 'input') } },
          },
        }
      : {}),
    responses: {
      '200': {
        description: 'OK: `{ok, operation_id, result}`',
        content: { 'application/json': { schema: envelope } },
      },
      ...errorResponses(
        r.permission === 'admin'
          ? [...ADMIN_ERRORS, 'forbidden']
          : ADMIN_ERRORS.filter((c) => r.permission !== 'public' || c !== 'unauthorized'),
        false,
      ),
    },
    'x-uis-permission': r.permission,
    'x-uis-idempotent': r.idempotent,
    'x-uis-audited': r.audited,
    ...(r.waitsUpTo ? { 'x-uis-waits-up-to': r.waitsUpTo } : {}),
  };
}

/** Definitions the schemas of the document being built hoisted (set for the duration of one build). */
let hoisted: SchemaDefs = {};
const jsonSchemaOf = (schema: z.ZodType, io: 'input' | 'output') => toJsonSchema(schema, io, hoisted);

/** The OpenAPI 3.1 document of a gateway: the serving and discovery routes from their zod schemas, the admin
 * routes from the command table, each with its error answers. */
export function buildOpenApiDocument(opts: OpenApiOptions): Record<string, unknown> {
  hoisted = {};
  const paths: Record<string, Record<string, unknown>> = {};
  const add = (path: string, method: string, op: Record<string, unknown>) => {
    paths[path] = { ...paths[path], [method]: op };
  };
  for (const r of [...SERVING_ROUTES, ...RELAX_ELASTIC_ROUTES])
    add(r.path, r.method, servingOperation(r, opts.roles));
  for (const r of opts.admin) add(r.path, r.method.toLowerCase(), adminOperation(r));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Unified Inference Service (uis)',
      version: opts.version ?? '0.1.0',
      description:
        'Serving (per role and at the root, OpenAI-compatible), discovery, and the admin commands of the control plane. Errors are `{"error": {code, message, path?, details?}}` (OpenAI routes: OpenAI\'s error object with the same code, path and details).',
    },
    servers: [{ url: '/' }],
    tags: [
      { name: 'serving', description: 'Raw SGLang generate through the gateway' },
      { name: 'openai', description: 'OpenAI-compatible routes' },
      { name: 'discovery', description: 'Discovery and health of a role' },
      {
        name: 'admin',
        description:
          'Operator commands: mutations take the admin token, reads the serving token (or the admin token; open without a configured serving token)',
      },
      {
        name: 'elastic',
        description: "Relax's elastic-rollout API under each role (the scale commands' other door)",
      },
      { name: 'service', description: 'The process itself' },
    ],
    paths,
    components: {
      schemas: { Error: ERROR_SCHEMA, OpenAIError: OPENAI_ERROR_SCHEMA, ...hoisted },
      securitySchemes: {
        adminToken: { type: 'http', scheme: 'bearer', description: 'gateway.admin_token / UIS_ADMIN_TOKEN' },
        servingToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'gateway.serving_token when set (the admin token works too); open otherwise',
        },
      },
    },
  };
}
