import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { EngineError } from './engine-error.ts';
import { SGLangRouterClient } from './router-client.ts';

interface Worker {
  id: string;
  url: string;
  worker_type: string;
  bootstrap_port?: number;
}

/** A fake router of either API generation; records every call. */
/** `workers`: ids in the 202 body; `workers-location`: id only in the Location header; `workers-url`: a /workers
 * router from before ids (workers addressed by URL); `legacy`: /add_worker?url=. */
type Generation = 'workers' | 'workers-location' | 'workers-url' | 'legacy';

function fakeRouter(generation: Generation) {
  const workers: Worker[] = [];
  const calls: string[] = [];
  let next = 1;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://x');
      calls.push(`${req.method} ${u.pathname}${u.search}`);
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (generation !== 'legacy') {
        if (req.method === 'POST' && u.pathname === '/workers') {
          const w = JSON.parse(body) as { url?: string; worker_type?: string; bootstrap_port?: number };
          if (!w.url) return json(400, { error: 'url required' });
          const id = generation === 'workers-url' ? w.url : `w-${next++}`;
          workers.push({
            id,
            url: w.url,
            worker_type: w.worker_type ?? 'regular',
            bootstrap_port: w.bootstrap_port,
          });
          if (generation === 'workers-location') {
            res.writeHead(202, { location: `/workers/${id}`, 'content-type': 'application/json' });
            return res.end('{"status":"accepted"}');
          }
          if (generation === 'workers-url') return json(202, { status: 'accepted' });
          return json(202, { status: 'accepted', worker_id: id, url: w.url, location: `/workers/${id}` });
        }
        if (req.method === 'GET' && u.pathname === '/workers') {
          return json(200, {
            workers: workers.map(({ id, ...w }) => ({
              ...(generation === 'workers-url' ? {} : { id }),
              ...w,
              is_healthy: true,
            })),
            total: workers.length,
          });
        }
        if (req.method === 'DELETE' && u.pathname.startsWith('/workers/')) {
          const id = decodeURIComponent(u.pathname.slice('/workers/'.length));
          const i = workers.findIndex((w) => w.id === id);
          if (i < 0) return json(404, { error: 'not found' });
          workers.splice(i, 1);
          return json(202, { status: 'accepted', worker_id: id });
        }
      } else {
        const url = u.searchParams.get('url');
        if (req.method === 'POST' && u.pathname === '/add_worker' && url) {
          workers.push({ id: url, url, worker_type: u.searchParams.get('worker_type') ?? 'regular' });
          res.writeHead(200, { 'content-type': 'text/plain' });
          return res.end(`Successfully added worker: ${url}`);
        }
        if (req.method === 'POST' && u.pathname === '/remove_worker' && url) {
          const i = workers.findIndex((w) => w.url === url);
          if (i >= 0) workers.splice(i, 1);
          res.writeHead(200, { 'content-type': 'text/plain' });
          return res.end(`Successfully removed worker: ${url}`);
        }
        if (req.method === 'GET' && u.pathname === '/list_workers') {
          return json(200, { urls: workers.map((w) => w.url) });
        }
      }
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('Not Found');
    });
  });
  return { server, workers, calls };
}

const servers: Server[] = [];
const clients: SGLangRouterClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function start(generation: Generation) {
  const fake = fakeRouter(generation);
  await new Promise<void>((r) => fake.server.listen(0, '127.0.0.1', r));
  servers.push(fake.server);
  const { port } = fake.server.address() as AddressInfo;
  const client = new SGLangRouterClient(`http://127.0.0.1:${port}`);
  clients.push(client);
  return { ...fake, client };
}

describe('SGLangRouterClient', () => {
  it('uses POST/GET/DELETE /workers on a current router', async () => {
    const { client, workers, calls } = await start('workers');
    const added = await client.addWorker({ url: 'http://10.0.0.1:15000', worker_type: 'regular' });
    expect(added).toEqual({ api: 'workers', workerId: 'w-1' });
    await client.addWorker({ url: 'http://10.0.0.2:15000', worker_type: 'prefill', bootstrap_port: 8998 });
    expect(workers.map((w) => [w.url, w.worker_type, w.bootstrap_port])).toEqual([
      ['http://10.0.0.1:15000', 'regular', undefined],
      ['http://10.0.0.2:15000', 'prefill', 8998],
    ]);
    const listed = await client.listWorkers();
    expect(listed.map((w) => [w.id, w.url, w.is_healthy])).toEqual([
      ['w-1', 'http://10.0.0.1:15000', true],
      ['w-2', 'http://10.0.0.2:15000', true],
    ]);
    await client.removeWorker('http://10.0.0.1:15000/');
    expect(workers.map((w) => w.url)).toEqual(['http://10.0.0.2:15000']);
    expect(calls).toContain('DELETE /workers/w-1');
    // Removing again is a no-op.
    await client.removeWorker('http://10.0.0.1:15000');
    expect(calls.filter((c) => c.startsWith('DELETE'))).toHaveLength(1);
    expect(client.apiGeneration()).toBe('workers');
    expect(calls.some((c) => c.includes('add_worker'))).toBe(false);
  });

  it('finds the worker id in the Location header, and addresses id-less workers by URL', async () => {
    const loc = await start('workers-location');
    expect(await loc.client.addWorker({ url: 'http://10.0.0.1:15000' })).toEqual({
      api: 'workers',
      workerId: 'w-1',
    });
    await loc.client.removeWorker('http://10.0.0.1:15000');
    expect(loc.calls).toContain('DELETE /workers/w-1');
    expect(loc.workers).toEqual([]);

    const old = await start('workers-url');
    expect(await old.client.addWorker({ url: 'http://10.0.0.1:15000' })).toEqual({ api: 'workers' });
    await old.client.removeWorker('http://10.0.0.1:15000');
    expect(old.calls).toContain('DELETE /workers/http%3A%2F%2F10.0.0.1%3A15000');
    expect(old.workers).toEqual([]);
  });

  it('falls back to /add_worker, /remove_worker and /list_workers when /workers answers 404', async () => {
    const { client, workers, calls } = await start('legacy');
    expect(await client.addWorker({ url: 'http://10.0.0.1:15000' })).toEqual({ api: 'legacy' });
    expect(client.apiGeneration()).toBe('legacy');
    await client.addWorker({ url: 'http://10.0.0.2:15000', worker_type: 'decode' });
    expect(workers.map((w) => [w.url, w.worker_type])).toEqual([
      ['http://10.0.0.1:15000', 'regular'],
      ['http://10.0.0.2:15000', 'decode'],
    ]);
    expect((await client.listWorkers()).map((w) => w.url)).toEqual([
      'http://10.0.0.1:15000',
      'http://10.0.0.2:15000',
    ]);
    await client.removeWorker('http://10.0.0.1:15000');
    expect(workers.map((w) => w.url)).toEqual(['http://10.0.0.2:15000']);
    // Only the first call probed the new API.
    expect(calls.filter((c) => c.startsWith('POST /workers'))).toHaveLength(1);
    expect(calls).toContain('POST /remove_worker?url=http%3A%2F%2F10.0.0.1%3A15000');
  });

  it('turns router errors into typed errors', async () => {
    const { client } = await start('workers');
    const err = await client.addWorker({ url: '' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as EngineError).code).toBe('engine_http_error');
    expect((err as EngineError).engineStatus).toBe(400);
    const down = new SGLangRouterClient('http://127.0.0.1:1');
    clients.push(down);
    const e2 = await down.listWorkers().catch((e: unknown) => e);
    expect((e2 as EngineError).code).toBe('engine_unreachable');
  });
});
