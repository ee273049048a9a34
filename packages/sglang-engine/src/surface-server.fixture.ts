/**
 * A stand-in SGLang HTTP server built from one release's committed surface, for the client conformance test: it
 * serves exactly the routes the release has (404 for a path it lacks, 405 for a method it does not take, as
 * FastAPI answers), answers with only the fields the release produces (a handler's dict keys, an answer class's
 * fields), and records every body field the release's request class does not declare.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { classFields, type Surface, type SurfaceRoute } from './sglang-surface.ts';

export interface RecordedCall {
  method: string;
  path: string;
  status: number;
  bodyKeys: string[];
  body: Record<string, unknown>;
}

export interface SurfaceServer {
  url: string;
  calls: RecordedCall[];
  /** Body fields the release would not read: `POST /path: field (class)`. */
  unknownFields: string[];
  /** Required fields of the request class a body left out (FastAPI would answer 422). */
  missingFields: string[];
  close(): Promise<void>;
}

/** Keeps the keys of `obj` that the release's class `cls` declares (all of them when the release has no such
 * class: the surface cannot say). */
function only(surface: Surface, cls: string, obj: Record<string, unknown>): Record<string, unknown> {
  const fields = classFields(surface, cls);
  if (fields === undefined) return obj;
  return Object.fromEntries(Object.entries(obj).filter(([k]) => fields.includes(k)));
}

/** Keeps the keys of `obj` that the release's answer `name` sets (under any condition). */
function produced(surface: Surface, name: string, obj: Record<string, unknown>): Record<string, unknown> {
  const fields = surface.answers[name]?.fields;
  if (fields === undefined)
    throw new Error(`SGLang ${surface.sglang_version}'s surface has no answer ${name}`);
  return Object.fromEntries(Object.entries(obj).filter(([k]) => k in fields));
}

function serverArgs(surface: Surface): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const flag of Object.values(surface.flags)) {
    const dest = flag.dest ?? (flag.names[0] as string).replace(/^-+/, '').replaceAll('-', '_');
    // A store_true flag without a default is False (argparse), as the dataclass field behind it.
    out[dest] = flag.default ?? (flag.arity[1] === 0 ? false : null);
  }
  return { ...out, model_path: '/models/m', tp_size: 1 };
}

/** What the release answers on `path`, before keeping only the keys its handler or class produces. */
function answer(
  surface: Surface,
  route: SurfaceRoute,
  body: Record<string, unknown>,
  weightVersion: string,
): unknown {
  const usage = only(surface, 'UsageInfo', { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 });
  const envelope = (object: string) => ({ id: 'x', object, created: 1, model: 'm' });
  switch (route.path) {
    case '/generate': {
      // Only the keys the release's tokenizer manager sets (the `generate` answers of its surface).
      const one = produced(surface, 'generate', {
        text: 'hi',
        output_ids: [1],
        meta_info: produced(surface, 'generate.meta_info', {
          id: 'r',
          finish_reason: { type: 'length', length: 1 },
          prompt_tokens: 1,
          completion_tokens: 1,
          cached_tokens: 0,
          weight_version: weightVersion,
          e2e_latency: 0.1,
        }),
      });
      return Array.isArray(body.text) ? body.text.map(() => one) : one;
    }
    case '/v1/chat/completions':
      return only(surface, 'ChatCompletionResponse', {
        ...envelope('chat.completion'),
        choices: [
          only(surface, 'ChatCompletionResponseChoice', {
            index: 0,
            message: only(surface, 'ChatMessage', { role: 'assistant', content: 'hi' }),
            finish_reason: 'length',
          }),
        ],
        usage,
      });
    case '/v1/completions':
      return only(surface, 'CompletionResponse', {
        ...envelope('text_completion'),
        choices: [
          only(surface, 'CompletionResponseChoice', { index: 0, text: 'hi', finish_reason: 'length' }),
        ],
        usage,
      });
    case '/v1/models':
      return only(surface, 'ModelList', {
        object: 'list',
        data: [
          only(surface, 'ModelCard', { id: 'm', object: 'model', created: 1, owned_by: 'sglang', root: 'm' }),
        ],
      });
    case '/get_load': {
      // 0.5.2: one token total; later one entry per DP rank (a class's fields, later the handler's dict).
      const entry = surface.answers['get_load[]'];
      if (entry !== undefined && 'load' in entry.fields) return { load: 7 };
      const full = { dp_rank: 0, num_reqs: 2, num_waiting_reqs: 1, num_tokens: 7 };
      return [entry === undefined ? full : produced(surface, 'get_load[]', full)];
    }
    case '/v1/loads':
      return {
        version: surface.sglang_version,
        loads: [
          produced(surface, 'v1/loads.loads[]', {
            dp_rank: 0,
            num_running_reqs: 1,
            num_waiting_reqs: 1,
            num_used_tokens: 7,
            num_total_tokens: 7,
          }),
        ],
      };
    default:
      return {
        // model info
        model_path: '/models/m',
        tokenizer_path: '/models/m',
        is_generation: true,
        preferred_sampling_params: null,
        weight_version: weightVersion,
        // server info
        ...(route.path?.endsWith('server_info') ? serverArgs(surface) : {}),
        version: surface.sglang_version,
        internal_states: [{}],
        // control answers
        success: true,
        message: 'ok',
        status: 'ok',
        num_paused_requests: 0,
        new_version: body.new_version,
      };
  }
}

function keep(route: SurfaceRoute, value: unknown): unknown {
  const keys = route.answer_keys;
  if (
    keys === undefined ||
    route.answer_open === true ||
    value === null ||
    typeof value !== 'object' ||
    Array.isArray(value)
  )
    return value;
  return Object.fromEntries(Object.entries(value).filter(([k]) => keys.includes(k)));
}

async function readBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text === '') return {};
  const parsed: unknown = JSON.parse(text);
  return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
    ? (parsed as Record<string, unknown>)
    : {};
}

function checkBody(
  surface: Surface,
  route: SurfaceRoute,
  body: Record<string, unknown>,
  s: SurfaceServer,
): void {
  const where = `${route.methods.join(',')} ${route.path}`;
  if (route.body === undefined) {
    for (const k of Object.keys(body)) s.unknownFields.push(`${where}: ${k} (the route reads no body)`);
    return;
  }
  const cls = surface.classes[route.body];
  if (cls === undefined) return;
  for (const k of Object.keys(body)) {
    if (!(k in cls.fields)) s.unknownFields.push(`${where}: ${k} (${route.body})`);
  }
  for (const [k, f] of Object.entries(cls.fields)) {
    if (f.required === true && !(k in body)) s.missingFields.push(`${where}: ${k} (${route.body})`);
  }
}

function respond(res: ServerResponse, status: number, value: unknown, stream: boolean): void {
  if (stream) {
    res.writeHead(status, { 'content-type': 'text/event-stream' });
    res.end(`data: ${JSON.stringify(value)}\n\ndata: [DONE]\n\n`);
    return;
  }
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export async function startSurfaceServer(surface: Surface): Promise<SurfaceServer> {
  const state: SurfaceServer = {
    url: '',
    calls: [],
    unknownFields: [],
    missingFields: [],
    close: async () => {},
  };
  let weightVersion = 'v1';
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] as string;
    const method = req.method ?? 'GET';
    void readBody(req).then((body) => {
      const routes = surface.routes.filter((r) => r.path === path);
      const route = routes.find((r) => r.methods.includes(method));
      const status = routes.length === 0 ? 404 : route === undefined ? 405 : (route.always_status ?? 200);
      state.calls.push({ method, path, status, bodyKeys: Object.keys(body), body });
      if (route === undefined || status !== 200) {
        // A handler that only raises (0.5.10's /get_weight_version: 404) answers FastAPI's {detail}.
        const detail = status === 404 ? 'Not Found' : status === 405 ? 'Method Not Allowed' : 'error';
        return respond(res, status, { detail }, false);
      }
      checkBody(surface, route, body, state);
      if (path === '/health' || path === '/health_generate' || path === '/flush_cache') {
        res.writeHead(200);
        return res.end();
      }
      const stream = body.stream === true;
      const next = body.weight_version ?? body.new_version;
      if (typeof next === 'string') weightVersion = next;
      let value = keep(route, answer(surface, route, body, weightVersion));
      if (stream && path === '/v1/chat/completions') {
        value = only(surface, 'ChatCompletionStreamResponse', {
          id: 'x',
          object: 'chat.completion.chunk',
          created: 1,
          model: 'm',
          choices: [
            only(surface, 'ChatCompletionResponseStreamChoice', {
              index: 0,
              delta: only(surface, 'DeltaMessage', { role: 'assistant', content: 'hi' }),
              finish_reason: 'length',
            }),
          ],
        });
      }
      respond(res, 200, value, stream);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return state;
}
