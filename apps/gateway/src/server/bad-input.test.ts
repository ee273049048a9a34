import { connect } from 'node:net';
import { ErrorBodySchema, type ErrorCode, statusOf, systemClock } from '@uis/spec';
import { describe, expect, it } from 'vitest';
import { deferTestConfig, gatewayOnSims } from '../testing/fixtures.ts';
import { AuthFailureLimiter } from './request-guard.ts';

// Bad input over real HTTP, route by route: every refusal is a 4xx JSON error with a stable code and the path of
// what is wrong, and accepted work (a relayed stream, a submitted batch) goes on unharmed. Cases already covered
// elsewhere (invalid JSON, 413 on serving, unknown model / route key, bad routing field types, wrong tokens) are
// not repeated here.

const ADMIN = 'bad-input-admin-token';
const SERVING = 'bad-input-serving-token';
const LIMIT = 4096;
const gw = gatewayOnSims({
  config: deferTestConfig(),
  server: {
    adminToken: ADMIN,
    servingToken: SERVING,
    maxBodyBytes: LIMIT,
    healthProbeMs: 0,
    // This table sends dozens of refused tokens from one address on purpose; the rate limit has its own test.
    authFailures: new AuthFailureLimiter(systemClock, 10_000),
  },
  // 1 ms per decode step: the stream opened before the cases outlives them.
  sim: { simOnloadMs: 10, simOffloadMs: 10, simDecodeUsPerToken: 1000 },
});

const JSON_TYPE = { 'content-type': 'application/json' };
const serving = { ...JSON_TYPE, authorization: `Bearer ${SERVING}` };
const admin = { ...JSON_TYPE, authorization: `Bearer ${ADMIN}` };
const genrmSample = (id: string) => ({
  sample_id: id,
  input: { messages: [{ role: 'user', content: 'Judge.' }] },
});
/** `{"text": "<0xff 0xfe>"}`: JSON syntax, but not UTF-8. */
const NOT_UTF8 = Buffer.concat([Buffer.from('{"text":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);

interface Case {
  name: string;
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: unknown;
  status: number;
  code: ErrorCode;
  /** The `path` the error names; null: the error concerns no field. */
  path: string | null;
}

// biome-ignore format: one line per case keeps the table readable
const cases: Case[] = [
  // ---- serving and discovery ----
  { name: 'not UTF-8 (generate)', method: 'POST', url: '/rollout/generate', headers: serving, body: NOT_UTF8, status: 400, code: 'invalid_json', path: 'body' },
  { name: 'not UTF-8 (chat)', method: 'POST', url: '/rollout/v1/chat/completions', headers: serving, body: NOT_UTF8, status: 400, code: 'invalid_json', path: 'body' },
  { name: 'text/plain body that is not JSON', method: 'POST', url: '/rollout/generate', headers: { ...serving, 'content-type': 'text/plain' }, body: 'text=hi', status: 400, code: 'invalid_json', path: 'body' },
  { name: 'form body', method: 'POST', url: '/rollout/chat/completions', headers: { ...serving, 'content-type': 'application/x-www-form-urlencoded' }, body: 'model=policy&x=1', status: 400, code: 'invalid_json', path: 'body' },
  { name: 'JSON null', method: 'POST', url: '/rollout/generate', headers: serving, body: 'null', status: 400, code: 'invalid_body', path: 'body' },
  { name: 'JSON string', method: 'POST', url: '/rollout/v1/chat/completions', headers: serving, body: '"hi"', status: 400, code: 'invalid_body', path: 'body' },
  { name: 'empty body', method: 'POST', url: '/teacher/generate', headers: serving, body: '', status: 400, code: 'invalid_json', path: 'body' },
  { name: 'empty model', method: 'POST', url: '/rollout/generate', headers: serving, body: { model: '', text: 'x' }, status: 400, code: 'invalid_body', path: 'body.model' },
  { name: 'empty rid list', method: 'POST', url: '/rollout/generate', headers: serving, body: { rid: [], text: 'x' }, status: 400, code: 'invalid_body', path: 'body.rid' },
  { name: 'GenRM messages of the wrong type', method: 'POST', url: '/genrm/generate', headers: serving, body: { messages: 'hi' }, status: 422, code: 'invalid_genrm_messages', path: 'body.messages' },
  { name: 'GenRM messages mixed with text', method: 'POST', url: '/genrm/generate', headers: serving, body: { messages: [{ role: 'user', content: 'hi' }], text: 'x' }, status: 400, code: 'invalid_body', path: 'body.text' },
  { name: 'GenRM message role of the wrong type', method: 'POST', url: '/genrm/generate', headers: serving, body: { messages: [{ role: 7, content: 'x' }] }, status: 422, code: 'invalid_genrm_messages', path: 'body.messages[0].role' },
  { name: 'GenRM sampling_params not an object', method: 'POST', url: '/genrm/generate', headers: serving, body: { messages: [{ role: 'user', content: 'x' }], sampling_params: 'hot' }, status: 422, code: 'invalid_genrm_messages', path: 'body.sampling_params' },
  { name: 'serving: empty Authorization', method: 'POST', url: '/rollout/generate', headers: { ...JSON_TYPE, authorization: '' }, body: { text: 'x' }, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'serving: Bearer without a token', method: 'POST', url: '/rollout/generate', headers: { ...JSON_TYPE, authorization: 'Bearer' }, body: { text: 'x' }, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'serving: Basic scheme', method: 'POST', url: '/rollout/v1/chat/completions', headers: { ...JSON_TYPE, authorization: `Basic ${ SERVING}` }, body: {}, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'discovery: token plus junk', method: 'GET', url: '/rollout/engines', headers: { authorization: `Bearer ${ SERVING} extra` }, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'GET on generate', method: 'GET', url: '/rollout/generate', headers: serving, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'OPTIONS on chat', method: 'OPTIONS', url: '/rollout/v1/chat/completions', headers: serving, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'PUT on chat', method: 'PUT', url: '/genrm/chat/completions', headers: serving, body: {}, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'DELETE on generate', method: 'DELETE', url: '/teacher/generate', headers: serving, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'POST on engines', method: 'POST', url: '/rollout/engines', headers: serving, body: {}, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'PUT on health', method: 'PUT', url: '/rollout/health', headers: serving, body: {}, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'POST on metrics', method: 'POST', url: '/metrics', headers: serving, body: {}, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'DELETE on the root model list', method: 'DELETE', url: '/v1/models', headers: serving, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'GET on the root chat', method: 'GET', url: '/v1/chat/completions', headers: serving, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'wait_revision not a number', method: 'GET', url: '/rollout/engines?wait_revision=abc', headers: serving, status: 400, code: 'invalid_query', path: 'query.wait_revision' },
  { name: 'wait_revision empty', method: 'GET', url: '/rollout/engines?wait_revision=', headers: serving, status: 400, code: 'invalid_query', path: 'query.wait_revision' },
  { name: 'wait_revision in hex', method: 'GET', url: '/rollout/engines?wait_revision=0x10', headers: serving, status: 400, code: 'invalid_query', path: 'query.wait_revision' },
  { name: 'wait_revision fractional', method: 'GET', url: '/rollout/engines?wait_revision=1.5', headers: serving, status: 400, code: 'invalid_query', path: 'query.wait_revision' },
  { name: 'timeout_s negative', method: 'GET', url: '/rollout/engines?wait_revision=0&timeout_s=-1', headers: serving, status: 400, code: 'invalid_query', path: 'query.timeout_s' },
  { name: 'timeout_s infinite', method: 'GET', url: '/rollout/engines?wait_revision=0&timeout_s=1e400', headers: serving, status: 400, code: 'invalid_query', path: 'query.timeout_s' },
  { name: 'timeout_s empty', method: 'GET', url: '/rollout/engines?wait_revision=0&timeout_s=', headers: serving, status: 400, code: 'invalid_query', path: 'query.timeout_s' },
  { name: 'engines schema=7', method: 'GET', url: '/rollout/engines?schema=7', headers: serving, status: 400, code: 'invalid_query', path: 'query.schema' },
  { name: 'health schema=7', method: 'GET', url: '/genrm/health?schema=7', headers: serving, status: 400, code: 'invalid_query', path: 'query.schema' },
  { name: 'discovery of an unknown role', method: 'GET', url: '/critic/engines', headers: serving, status: 404, code: 'unknown_role', path: 'role' },
  { name: 'health of an unknown role', method: 'GET', url: '/critic/health', status: 404, code: 'unknown_role', path: 'role' },
  { name: 'chat on an unknown role', method: 'POST', url: '/critic/v1/chat/completions', headers: serving, body: {}, status: 404, code: 'unknown_role', path: 'role' },
  { name: 'malformed percent-encoding', method: 'GET', url: '/%zz', status: 400, code: 'invalid_path', path: 'path' },
  // ---- admin ----
  { name: 'admin: PUT on phases', method: 'PUT', url: '/admin/phases', headers: admin, body: {}, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'admin: GET on a drain', method: 'GET', url: '/admin/roles/rollout/drain', headers: admin, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'admin: unknown path', method: 'GET', url: '/admin/nope', headers: admin, status: 404, code: 'not_found', path: '/admin/nope' },
  { name: 'admin: empty Authorization', method: 'POST', url: '/admin/roles/rollout/drain', headers: { ...JSON_TYPE, authorization: '' }, body: {}, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'admin: Bearer without a token', method: 'GET', url: '/admin/phases', headers: { authorization: 'Bearer ' }, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'admin: Basic scheme', method: 'POST', url: '/admin/batches', headers: { ...JSON_TYPE, authorization: `Basic ${ ADMIN}` }, body: {}, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'admin: the serving token', method: 'POST', url: '/admin/phases/advance', headers: serving, body: {}, status: 403, code: 'forbidden', path: 'headers.authorization' },
  { name: 'admin: JSON array', method: 'POST', url: '/admin/roles/rollout/drain', headers: admin, body: '[]', status: 400, code: 'invalid_body', path: 'body' },
  { name: 'admin: JSON null', method: 'POST', url: '/admin/barriers/wait', headers: admin, body: 'null', status: 400, code: 'invalid_body', path: 'body' },
  { name: 'admin: not UTF-8', method: 'POST', url: '/admin/phases/resolve', headers: admin, body: NOT_UTF8, status: 400, code: 'invalid_json', path: 'body' },
  { name: 'admin: body over the limit', method: 'POST', url: '/admin/phases/resolve', headers: admin, body: { phase: 'rollout', note: 'x'.repeat(LIMIT) }, status: 413, code: 'body_too_large', path: 'body' },
  { name: 'admin: unknown field', method: 'POST', url: '/admin/roles/rollout/drain', headers: admin, body: { force: true }, status: 400, code: 'invalid_input', path: 'body' },
  { name: 'admin: deadline of the wrong type', method: 'POST', url: '/admin/roles/rollout/drain', headers: admin, body: { deadline_ms: 'soon' }, status: 400, code: 'invalid_input', path: 'body.deadline_ms' },
  { name: 'admin: unknown drain policy', method: 'POST', url: '/admin/roles/rollout/models/policy/drain', headers: admin, body: { policy: 'nuke' }, status: 400, code: 'invalid_input', path: 'body.policy' },
  { name: 'admin: unknown tag', method: 'POST', url: '/admin/roles/rollout/activate', headers: admin, body: { tags: ['ram'] }, status: 400, code: 'invalid_input', path: 'body.tags[0]' },
  { name: 'admin: unknown weight source', method: 'POST', url: '/admin/roles/rollout/models/policy/weights', headers: admin, body: { source: 'cloud' }, status: 400, code: 'invalid_input', path: 'body.source' },
  { name: 'admin: unknown model', method: 'POST', url: '/admin/roles/rollout/models/nope/deactivate', headers: admin, body: {}, status: 404, code: 'unknown_model', path: 'model' },
  { name: 'admin: external engine URL', method: 'POST', url: '/admin/roles/rollout/models/policy/engines', headers: admin, body: { url: 'ftp://x' }, status: 400, code: 'invalid_url', path: 'url' },
  { name: 'admin: unknown engine', method: 'POST', url: '/admin/roles/rollout/engines/restart', headers: admin, body: { engine_id: 'nope/0' }, status: 404, code: 'unknown_engine', path: 'engine_id' },
  { name: 'admin: operation_id not a string', method: 'POST', url: '/admin/roles/rollout/drain', headers: admin, body: { operation_id: 5 }, status: 400, code: 'invalid_input', path: 'body.operation_id' },
  { name: 'admin: empty Idempotency-Key', method: 'POST', url: '/admin/phases/advance', headers: { ...admin, 'idempotency-key': '' }, body: {}, status: 400, code: 'invalid_input', path: 'headers.idempotency-key' },
  { name: 'admin: blank operation_id', method: 'POST', url: '/admin/phases/advance', headers: admin, body: { operation_id: '  ' }, status: 400, code: 'invalid_input', path: 'body.operation_id' },
  { name: 'admin: header and body ids differ', method: 'POST', url: '/admin/phases/advance', headers: { ...admin, 'idempotency-key': 'a' }, body: { operation_id: 'b' }, status: 400, code: 'invalid_input', path: 'body.operation_id' },
  { name: 'admin: unknown activation group', method: 'POST', url: '/admin/phases/advance', headers: admin, body: { group: 'nope' }, status: 404, code: 'unknown_activation_group', path: 'group' },
  { name: 'admin: unknown target phase', method: 'POST', url: '/admin/phases/advance', headers: admin, body: { to: 'nope' }, status: 404, code: 'unknown_phase', path: 'phase' },
  { name: 'admin: PUT on a mutation', method: 'PUT', url: '/admin/roles/rollout/drain', headers: admin, body: {}, status: 405, code: 'method_not_allowed', path: 'method' },
  { name: 'admin: unknown operation', method: 'POST', url: '/admin/operations', headers: admin, body: { kind: 'nuke' }, status: 404, code: 'not_found', path: '/admin/operations' },
  { name: 'barrier: no phase', method: 'POST', url: '/admin/barriers/wait', headers: admin, body: {}, status: 400, code: 'invalid_input', path: 'body.phase' },
  { name: 'barrier: unknown phase', method: 'POST', url: '/admin/barriers/wait', headers: admin, body: { phase: 'nope', timeout_s: 1 }, status: 404, code: 'unknown_phase', path: 'phase' },
  { name: 'barrier: unknown group', method: 'POST', url: '/admin/barriers/wait', headers: admin, body: { phase: 'train', group: 'nope', timeout_s: 1 }, status: 404, code: 'unknown_activation_group', path: 'group' },
  { name: 'barrier: negative timeout', method: 'POST', url: '/admin/barriers/wait', headers: admin, body: { phase: 'train', timeout_s: -1 }, status: 400, code: 'invalid_input', path: 'body.timeout_s' },
  { name: 'barrier release: unknown phase', method: 'POST', url: '/admin/barriers/release', headers: admin, body: { phase: 'nope' }, status: 404, code: 'unknown_phase', path: 'phase' },
  { name: 'batch: unknown kind', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'reward', samples: [genrmSample('a')] }, status: 400, code: 'invalid_input', path: 'body.kind' },
  { name: 'batch: samples not a list', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'genrm_score', samples: 'x' }, status: 400, code: 'invalid_input', path: 'body.samples' },
  { name: 'batch: null sample', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'genrm_score', samples: [null] }, status: 400, code: 'invalid_samples', path: 'samples[0]' },
  { name: 'batch: sample without an id', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'genrm_score', samples: [{ input: genrmSample('a').input }] }, status: 400, code: 'invalid_samples', path: 'samples[0].sample_id' },
  { name: 'batch: input of the wrong kind', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'teacher_logprobs', samples: [genrmSample('a')] }, status: 400, code: 'invalid_samples', path: 'samples[0].input.input_ids' },
  { name: 'batch: duplicate sample ids', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'genrm_score', samples: [genrmSample('a'), genrmSample('a')] }, status: 400, code: 'duplicate_sample', path: 'samples[1].sample_id' },
  { name: 'batch: model of no scorer', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'genrm_score', model: 'nope', samples: [genrmSample('a')] }, status: 404, code: 'unknown_model', path: 'model' },
  { name: 'batch: model of the other scorer', method: 'POST', url: '/admin/batches', headers: admin, body: { kind: 'genrm_score', model: 'math-teacher', samples: [genrmSample('a')] }, status: 404, code: 'unknown_model', path: 'model' },
  { name: 'batch list: unknown state', method: 'GET', url: '/admin/batches?state=done', headers: admin, status: 400, code: 'invalid_input', path: 'query.state' },
  { name: 'batch: unknown id', method: 'GET', url: '/admin/batches/nope', headers: admin, status: 404, code: 'batch_not_found', path: 'batch_id' },
  { name: 'events: limit not a number', method: 'GET', url: '/admin/events?limit=abc', headers: admin, status: 400, code: 'invalid_input', path: 'query.limit' },
  // ---- tRPC (its envelope; the product's error in `error.data.error`) ----
  { name: 'tRPC: input field missing', method: 'POST', url: '/trpc/checkToken', headers: JSON_TYPE, body: {}, status: 400, code: 'invalid_input', path: 'input.token' },
  { name: 'tRPC: input not JSON', method: 'POST', url: '/trpc/checkToken', headers: JSON_TYPE, body: 'nope', status: 400, code: 'invalid_json', path: 'input' },
  { name: 'tRPC: unknown role', method: 'POST', url: '/trpc/drainModel', headers: admin, body: { role: 'critic', model: 'x' }, status: 404, code: 'unknown_role', path: 'input.role' },
  { name: 'tRPC: unknown model', method: 'POST', url: '/trpc/activateModel', headers: admin, body: { role: 'rollout', model: 'nope' }, status: 404, code: 'unknown_model', path: 'input.model' },
  { name: 'tRPC: unknown replica', method: 'POST', url: '/trpc/restartReplica', headers: admin, body: { role: 'rollout', engine_id: 'nope/0' }, status: 404, code: 'unknown_engine', path: 'input.engine_id' },
  { name: 'tRPC: replica without its role', method: 'POST', url: '/trpc/restartReplica', headers: admin, body: { engine_id: 'nope/0' }, status: 400, code: 'invalid_input', path: 'input.role' },
  { name: 'tRPC: Bearer without a token', method: 'POST', url: '/trpc/drainModel', headers: { ...JSON_TYPE, authorization: 'Bearer' }, body: { role: 'rollout', model: 'policy' }, status: 401, code: 'unauthorized', path: 'headers.authorization' },
  { name: 'tRPC: text/plain', method: 'POST', url: '/trpc/checkToken', headers: { 'content-type': 'text/plain' }, body: { token: 'x' }, status: 415, code: 'unsupported_media_type', path: null },
  { name: 'tRPC: body over the limit', method: 'POST', url: '/trpc/checkToken', headers: JSON_TYPE, body: { token: 'x'.repeat(LIMIT) }, status: 413, code: 'body_too_large', path: 'body' },
];

/** The product's error object of an answer: top level, or inside tRPC's envelope (`error.data.error`). */
function productError(json: unknown) {
  const envelope = (json as { error?: { data?: { error?: unknown; stack?: unknown } } }).error?.data;
  if (envelope === undefined) return ErrorBodySchema.parse(json).error;
  expect(envelope.stack).toBeUndefined();
  return ErrorBodySchema.shape.error.parse(envelope.error);
}

/** Writes raw bytes on a fresh connection and reads until the server closes it. */
function rawExchange(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const u = new URL(gw.url);
    const socket = connect(Number(u.port), u.hostname);
    let out = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      out += d;
    });
    socket.on('close', () => resolve(out));
    socket.on('error', reject);
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.write(bytes);
  });
}

/** Sends `first` on a keep-alive connection, waits for its whole answer, then sends `bytes` on the same connection
 * and reads until the server closes it: what a pooled client (undici, aiohttp) sees on a reused connection. */
function exchangeAfter(first: string, bytes: string): Promise<{ first: string; second: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(gw.url);
    const socket = connect(Number(u.port), u.hostname);
    let out = '';
    let answered: string | undefined;
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      out += d;
      const length = /content-length: (\d+)/i.exec(out)?.[1];
      const end = out.indexOf('\r\n\r\n');
      if (
        answered === undefined &&
        length !== undefined &&
        end >= 0 &&
        out.length >= end + 4 + Number(length)
      ) {
        answered = out;
        out = '';
        socket.write(bytes);
      }
    });
    socket.on('close', () => resolve({ first: answered ?? '', second: out }));
    socket.on('error', reject);
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.write(first);
  });
}

describe('bad input over HTTP', { timeout: 60_000 }, () => {
  it('refuses every bad request with a 4xx JSON error naming its code and path, and accepted work goes on', async () => {
    // Accepted work first: a stream relayed through the gateway and a sealed batch waiting for its phase.
    const stream = await fetch(`${gw.url}/rollout/v1/chat/completions`, {
      method: 'POST',
      headers: serving,
      body: JSON.stringify({
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 3000,
        ignore_eos: true,
        stream: true,
      }),
    });
    expect(stream.status).toBe(200);
    // A broken stream fails the assertion below instead of escaping as an unhandled rejection.
    const streamed = new Response(stream.body).text().catch((e: unknown) => `stream failed: ${String(e)}`);
    const submitted = await fetch(`${gw.url}/admin/batches`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ kind: 'genrm_score', samples: [genrmSample('kept')] }),
    });
    expect(submitted.status).toBe(200);
    const batchId = ((await submitted.json()) as { result: { id: string } }).result.id;

    const answers = [];
    for (const c of cases) {
      const body =
        c.body === undefined || typeof c.body === 'string' || Buffer.isBuffer(c.body)
          ? c.body
          : JSON.stringify(c.body);
      const r = await fetch(`${gw.url}${c.url}`, {
        method: c.method,
        headers: c.headers ?? {},
        ...(body === undefined ? {} : { body }),
      });
      const text = await r.text();
      answers.push({ name: c.name, status: r.status, type: r.headers.get('content-type'), text });
    }
    for (const [i, c] of cases.entries()) {
      const a = answers[i]!;
      expect({ name: a.name, status: a.status, type: a.type }).toEqual({
        name: c.name,
        status: c.status,
        type: expect.stringContaining('application/json'),
      });
      const error = productError(JSON.parse(a.text));
      expect({ name: c.name, code: error.code, path: error.path ?? null }).toEqual({
        name: c.name,
        code: c.code,
        path: c.path,
      });
      // The answer's status is the error table's for its code, through every door (tRPC's code follows it).
      expect({ name: c.name, status: statusOf(c.code) }).toEqual({ name: c.name, status: a.status });
    }
    // 405 names the methods the route takes.
    const put = await fetch(`${gw.url}/rollout/generate`, { method: 'PUT', headers: serving, body: '{}' });
    expect(put.headers.get('allow')).toBe('POST');
    const post = await fetch(`${gw.url}/rollout/engines`, { method: 'POST', headers: serving, body: '{}' });
    expect(post.headers.get('allow')).toBe('GET, HEAD');

    // The stream was relayed to its end, and the gateway still serves.
    const text = await streamed;
    expect(text).toContain('data: [DONE]');
    expect(gw.server.inFlight()).toBe(0);
    const ok = await fetch(`${gw.url}/rollout/generate`, {
      method: 'POST',
      headers: serving,
      body: JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 2 } }),
    });
    expect(ok.status).toBe(200);
    // No refused submission left a batch behind; the accepted one still waits for its phase.
    expect(gw.plane.store.list().map((b) => [b.id, b.state])).toEqual([[batchId, 'sealed']]);
    // A refused id (empty, mismatched) reserved nothing: the next advance runs, scores the batch and reaches train.
    const advance = await fetch(`${gw.url}/admin/phases/advance`, {
      method: 'POST',
      headers: { ...admin, 'idempotency-key': 'a' },
      body: '{}',
    });
    expect(advance.status).toBe(200);
    expect(gw.plane.coordinator.lease('actor')).toMatchObject({ phase: 'train', status: 'held' });
    expect(gw.plane.store.get(batchId).state).toBe('committed');
  });

  it('answers requests the HTTP parser refuses with a JSON error, and keeps serving', async () => {
    const table = [
      {
        name: 'control byte in a header',
        bytes: 'GET /rollout/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\u0001b\r\n\r\n',
        status: 400,
        code: 'invalid_http',
      },
      { name: 'garbage request line', bytes: 'HELLO\r\n\r\n', status: 400, code: 'invalid_http' },
      {
        name: 'bad chunk size',
        bytes: `POST /rollout/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${SERVING}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
        status: 400,
        code: 'invalid_http',
      },
      {
        name: 'Content-Length not a number',
        bytes: 'POST /admin/batches HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n{}',
        status: 400,
        code: 'invalid_http',
      },
      {
        name: 'headers too large',
        bytes: `GET /rollout/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
        status: 431,
        code: 'headers_too_large',
      },
    ];
    for (const c of table) {
      const answer = await rawExchange(c.bytes);
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      expect({ name: c.name, status: head.split(' ')[1] }).toEqual({
        name: c.name,
        status: String(c.status),
      });
      expect(head.toLowerCase()).toContain('content-type: application/json');
      expect({ name: c.name, code: ErrorBodySchema.parse(JSON.parse(body)).error.code }).toEqual({
        name: c.name,
        code: c.code,
      });
    }
    expect((await fetch(`${gw.url}/rollout/health`, { headers: serving })).status).toBe(200);
  });

  it('answers a refused request on a reused keep-alive connection too, not with a silent close', async () => {
    const health = `GET /rollout/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${SERVING}\r\n\r\n`;
    const { first, second } = await exchangeAfter(
      health,
      `GET /rollout/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    expect(first.split(' ')[1]).toBe('200');
    const [head = '', body = ''] = second.split('\r\n\r\n');
    expect(head.split(' ')[1]).toBe('431');
    expect(ErrorBodySchema.parse(JSON.parse(body)).error.code).toBe('headers_too_large');
  });
});
