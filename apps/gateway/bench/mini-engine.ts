/**
 * A minimal SGLang-shaped upstream for the bench when the simulator is not available (`--engine mini`): it
 * answers `/generate` and `/v1/chat/completions` (streaming or not) and `/health`, and models decode as one
 * batched step every `--sim-decode-us-per-token` microseconds that gives every running request one token.
 *   tsx mini-engine.ts --port 30001 --sim-decode-us-per-token 20000 --sim-prefill-us-per-token 0
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    'sim-decode-us-per-token': { type: 'string', default: '0' },
    'sim-prefill-us-per-token': { type: 'string', default: '0' },
    'served-model-name': { type: 'string', default: 'sim-model' },
  },
  strict: false,
});
const decodeMs = Number(values['sim-decode-us-per-token']) / 1000;
const prefillMsPerToken = Number(values['sim-prefill-us-per-token']) / 1000;
const model = String(values['served-model-name']);

interface Running {
  res: ServerResponse;
  left: number;
  produced: number;
  chat: boolean;
  stream: boolean;
  rid: string;
}
const running = new Set<Running>();
let stepping = false;

function chunk(r: Running): string {
  if (r.chat) {
    return `data: {"id":"${r.rid}","object":"chat.completion.chunk","model":"${model}","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n`;
  }
  return `data: {"text":"${' tok'.repeat(r.produced)}","meta_info":{"id":"${r.rid}","completion_tokens":${r.produced}}}\n\n`;
}

function finish(r: Running): void {
  running.delete(r);
  if (r.stream) {
    r.res.end('data: [DONE]\n\n');
    return;
  }
  const text = ' tok'.repeat(r.produced);
  const body = r.chat
    ? JSON.stringify({
        id: r.rid,
        object: 'chat.completion',
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }],
      })
    : JSON.stringify({
        text,
        meta_info: { id: r.rid, completion_tokens: r.produced, finish_reason: 'length' },
      });
  r.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  r.res.end(body);
}

/** One decode step: every running request gets a token, as a GPU batch does. */
function step(): void {
  for (const r of running) {
    r.produced++;
    r.left--;
    if (r.stream && r.left > 0) r.res.write(chunk(r));
    if (r.left <= 0) finish(r);
  }
  if (running.size > 0) setTimeout(step, decodeMs);
  else stepping = false;
}

function admit(r: Running, prefillMs: number): void {
  r.res.on('close', () => running.delete(r));
  const start = () => {
    if (r.stream) {
      r.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    }
    if (decodeMs === 0) {
      // No modelled latency: produce everything now.
      while (r.left > 0) {
        r.produced++;
        r.left--;
        if (r.stream && r.left > 0) r.res.write(chunk(r));
      }
      finish(r);
      return;
    }
    running.add(r);
    if (!stepping) {
      stepping = true;
      setTimeout(step, decodeMs);
    }
  };
  if (prefillMs > 0) setTimeout(start, prefillMs);
  else start();
}

let seq = 0;
const server = createServer({ keepAliveTimeout: 120_000 }, (req, res) => {
  if (req.method === 'GET') {
    res.writeHead(req.url === '/health' || req.url === '/health_generate' ? 200 : 404).end();
    return;
  }
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(Buffer.concat(parts).toString()) as Record<string, unknown>;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"invalid json"}}');
      return;
    }
    const chat = req.url === '/v1/chat/completions';
    const sampling = (body.sampling_params ?? {}) as { max_new_tokens?: number };
    const maxTokens = Number(chat ? (body.max_tokens ?? 16) : (sampling.max_new_tokens ?? 16));
    const promptChars = JSON.stringify(chat ? body.messages : (body.text ?? body.input_ids ?? '')).length;
    const rid = typeof body.rid === 'string' ? body.rid : `r${seq++}`;
    admit(
      { res, left: Math.max(1, maxTokens), produced: 0, chat, stream: body.stream === true, rid },
      (promptChars / 4) * prefillMsPerToken,
    );
  });
});
server.listen(Number(values.port), String(values.host), () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
let connections = 0;
server.on('connection', () => {
  connections++;
});
process.on('SIGTERM', () => {
  // How many TCP connections this engine accepted: a proxy that keeps its upstream sockets alive opens few.
  process.stderr.write(`${JSON.stringify({ connections })}\n`);
  process.exit(0);
});
