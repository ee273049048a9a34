import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';

/** Bodies above this are refused (a token-id batch of an RL step stays far below). */
export const MAX_BODY_BYTES = 256 * 1024 * 1024;

/** Reads and JSON-parses a body; an empty body is `{}` (SGLang accepts body-less control POSTs). */
export function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners('data');
        req.resume();
        reject(new BadJson(`the body is larger than ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on('error', reject);
    req.on('end', () => {
      const raw = chunks.length === 1 ? (chunks[0] as Buffer).toString() : Buffer.concat(chunks).toString();
      if (raw.trim() === '') return resolve({});
      try {
        resolve(JSON.parse(raw));
      } catch (e) {
        reject(new BadJson((e as Error).message));
      }
    });
  });
}

export class BadJson extends Error {}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) });
  res.end(data);
}

export function sendText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

export function sendEmpty(res: ServerResponse, status: number): void {
  res.writeHead(status, { 'content-length': 0 });
  res.end();
}

/** SGLang's `_create_error_response`: 400 with `{error: {message}}`. */
export function sendSGLangError(res: ServerResponse, message: string, status = 400): void {
  sendJson(res, status, { error: { message } });
}

/** FastAPI's request validation answer: 422 `{detail: [{type, loc, msg}]}`. */
export function sendValidation(res: ServerResponse, error: z.ZodError): void {
  sendJson(res, 422, {
    detail: error.issues.map((i) => ({ type: i.code, loc: ['body', ...i.path.map(String)], msg: i.message })),
  });
}

/** The OpenAI-style error body of the /v1 endpoints. */
export function sendOpenAIError(res: ServerResponse, status: number, message: string): void {
  const type = status === 404 ? 'NotFoundError' : status >= 500 ? 'InternalServerError' : 'BadRequestError';
  sendJson(res, status, { object: 'error', message, type, param: null, code: status });
}

/** How a route family refuses a body it cannot take: bad JSON, or JSON its schema does not accept. */
export interface BodyRefusal {
  badJson(res: ServerResponse, message: string): void;
  invalid(res: ServerResponse, error: z.ZodError): void;
}

/** SGLang's native routes answer as FastAPI does: 422 `{detail: [...]}` for both. */
export const FASTAPI_REFUSAL: BodyRefusal = {
  badJson: (res, message) =>
    sendJson(res, 422, {
      detail: [{ type: 'json_invalid', loc: ['body'], msg: `JSON decode error: ${message}` }],
    }),
  invalid: sendValidation,
};

/** The /v1 routes answer OpenAI's 400 naming the first issue's path. */
export const OPENAI_REFUSAL: BodyRefusal = {
  badJson: (res, message) => sendOpenAIError(res, 400, `Invalid JSON: ${message}`),
  invalid: (res, error) => {
    const i = error.issues[0];
    sendOpenAIError(res, 400, `${i?.path.join('.') || 'body'}: ${i?.message ?? 'invalid request'}`);
  },
};

/** Reads and validates a body; on bad JSON or a schema failure it answers as `refusal` says and returns
 * undefined. */
export async function readBody<T extends z.ZodType>(
  req: IncomingMessage,
  res: ServerResponse,
  schema: T,
  refusal: BodyRefusal,
): Promise<z.infer<T> | undefined> {
  let raw: unknown;
  try {
    raw = await readJson(req);
  } catch (e) {
    if (!(e instanceof BadJson)) throw e;
    refusal.badJson(res, e.message);
    return undefined;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    refusal.invalid(res, parsed.error);
    return undefined;
  }
  return parsed.data;
}

export function startSse(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
}

const corked = new WeakSet<ServerResponse>();

/** Writes one event. Events of one scheduler step are corked into one socket write per stream. */
export function sseData(res: ServerResponse, body: unknown): void {
  if (res.writableEnded || res.destroyed) return;
  if (!corked.has(res)) {
    corked.add(res);
    res.cork();
    process.nextTick(() => {
      corked.delete(res);
      res.uncork();
    });
  }
  res.write(`data: ${JSON.stringify(body)}\n\n`);
}

export function sseDone(res: ServerResponse): void {
  if (res.writableEnded || res.destroyed) return;
  res.end('data: [DONE]\n\n');
}
