import type { EngineWorkerType } from '@uis/spec';
import { type Dispatcher, Pool } from 'undici';
import { z } from 'zod';
import { badResponse, EngineError, transportError } from './engine-error.ts';

/** Router (sgl-model-gateway / smg) worker-management shapes. Loose: the router adds fields across versions. */
export const RouterWorkerSchema = z.looseObject({
  /** A UUID on current routers; older /workers routers had no id and addressed workers by URL. */
  id: z.string().optional(),
  url: z.string(),
  worker_type: z.string().optional(),
  model_id: z.string().nullish(),
  is_healthy: z.boolean().optional(),
  load: z.number().optional(),
  bootstrap_port: z.number().int().nullish(),
});
export type RouterWorker = z.infer<typeof RouterWorkerSchema>;

export const RouterWorkerListSchema = z.looseObject({
  workers: z.array(RouterWorkerSchema),
  total: z.number().int().optional(),
});

/** POST /workers answers 202 with a job description. */
export const RouterAddWorkerResponseSchema = z.looseObject({
  status: z.string().optional(),
  worker_id: z.string().optional(),
  url: z.string().optional(),
  location: z.string().optional(),
  message: z.string().optional(),
});

/** GET /list_workers of routers <= 0.2.1. */
export const LegacyWorkerListSchema = z.looseObject({ urls: z.array(z.string()) });

export interface AddWorkerRequest {
  url: string;
  worker_type?: EngineWorkerType;
  bootstrap_port?: number;
  model_id?: string;
}

export type RouterApi = 'workers' | 'legacy';

export interface RouterClientOptions {
  dispatcher?: Dispatcher;
  /** Per-call deadline. Default 30 s. */
  timeoutMs?: number;
  /** Force an API generation instead of detecting it on the first call. */
  api?: RouterApi;
}

interface Answer {
  status: number;
  text: string;
  endpoint: string;
  location: string | undefined;
}

/** The id at the end of a `/workers/<id>` location (header or body), as current routers return it. */
function idFromLocation(location: string | undefined): string | undefined {
  if (!location) return undefined;
  const path = new URL(location, 'http://router').pathname.replace(/\/+$/, '');
  const i = path.lastIndexOf('/');
  if (i <= 0 || !path.slice(0, i).endsWith('/workers')) return undefined;
  return decodeURIComponent(path.slice(i + 1)) || undefined;
}

/** Registers and removes engines in an SGLang router. Speaks the `/workers` API and falls back to the old
 * `/add_worker?url=` API when the router answers 404. */
export class SGLangRouterClient {
  readonly baseUrl: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly timeoutMs: number;
  private api: RouterApi | undefined;
  /** Worker ids the router returned on registration, by worker URL. */
  private readonly ids = new Map<string, string>();

  constructor(baseUrl: string, opts: RouterClientOptions = {}) {
    this.baseUrl = new URL(baseUrl).origin;
    this.ownsDispatcher = opts.dispatcher === undefined;
    this.dispatcher = opts.dispatcher ?? new Pool(this.baseUrl, { connections: 4 });
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.api = opts.api;
  }

  /** The API generation in use (known after the first call). */
  apiGeneration(): RouterApi | undefined {
    return this.api;
  }

  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.destroy();
  }

  /** Adds a worker; with the `/workers` API the router queues it (202) and returns its id when it says it. */
  async addWorker(req: AddWorkerRequest): Promise<{ api: RouterApi; workerId?: string }> {
    if (this.api !== 'legacy') {
      const a = await this.call('POST', '/workers', req);
      if (a.status !== 404) {
        this.expectOk(a);
        this.api = 'workers';
        const body = this.parse(a, RouterAddWorkerResponseSchema, true);
        const workerId = body?.worker_id ?? idFromLocation(a.location ?? body?.location);
        if (workerId === undefined) return { api: 'workers' };
        this.ids.set(trimUrl(req.url), workerId);
        return { api: 'workers', workerId };
      }
      this.api = 'legacy';
    }
    const q = new URLSearchParams({ url: req.url });
    // Old PD routers took the role and bootstrap port as query parameters too.
    if (req.worker_type && req.worker_type !== 'regular') q.set('worker_type', req.worker_type);
    if (req.bootstrap_port !== undefined) q.set('bootstrap_port', String(req.bootstrap_port));
    this.expectOk(await this.call('POST', `/add_worker?${q}`));
    return { api: 'legacy' };
  }

  /** Removes the worker serving `url`; removing an unknown worker is a no-op (idempotent). Current routers
   * address a worker by the id they returned (or list); routers before ids addressed it by its URL. */
  async removeWorker(url: string): Promise<void> {
    let id = this.api === 'legacy' ? undefined : this.ids.get(trimUrl(url));
    if (id === undefined) {
      const worker = (await this.listWorkers()).find((w) => trimUrl(w.url) === trimUrl(url));
      if (!worker) return;
      id = worker.id ?? worker.url;
    }
    if (this.api === 'legacy') {
      this.expectOk(await this.call('POST', `/remove_worker?${new URLSearchParams({ url })}`));
      return;
    }
    const a = await this.call('DELETE', `/workers/${encodeURIComponent(id)}`);
    this.ids.delete(trimUrl(url));
    if (a.status === 404) return;
    this.expectOk(a);
  }

  /** Lists the workers (legacy routers only know URLs). */
  async listWorkers(): Promise<RouterWorker[]> {
    if (this.api !== 'legacy') {
      const a = await this.call('GET', '/workers');
      if (a.status !== 404) {
        this.expectOk(a);
        this.api = 'workers';
        return this.parse(a, RouterWorkerListSchema).workers;
      }
      this.api = 'legacy';
    }
    const a = await this.call('GET', '/list_workers');
    this.expectOk(a);
    return this.parse(a, LegacyWorkerListSchema).urls.map((url) => ({ url }));
  }

  private parse<S extends z.ZodType>(a: Answer, schema: S, optional: true): z.infer<S> | undefined;
  private parse<S extends z.ZodType>(a: Answer, schema: S): z.infer<S>;
  private parse<S extends z.ZodType>(a: Answer, schema: S, optional = false): z.infer<S> | undefined {
    let value: unknown;
    try {
      value = JSON.parse(a.text);
    } catch {
      if (optional) return undefined;
      throw new EngineError({
        code: 'engine_bad_response',
        endpoint: a.endpoint,
        path: 'response',
        message: `answer is not JSON: ${a.text.slice(0, 200)}`,
      });
    }
    const r = schema.safeParse(value);
    if (r.success) return r.data;
    if (optional) return undefined;
    throw badResponse(a.endpoint, r.error);
  }

  private expectOk(a: Answer): void {
    if (a.status >= 200 && a.status < 300) return;
    throw new EngineError({
      code: 'engine_http_error',
      endpoint: a.endpoint,
      engineStatus: a.status,
      body: a.text.slice(0, 8192),
      message: `HTTP ${a.status}: ${a.text.slice(0, 500) || '(empty body)'}`,
    });
  }

  private async call(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<Answer> {
    const endpoint = `${method} ${this.baseUrl}${path}`;
    const state = { timedOut: false, cancelled: false, midStream: false, timeoutMs: this.timeoutMs };
    const controller = new AbortController();
    const timer = setTimeout(() => {
      state.timedOut = true;
      controller.abort();
    }, this.timeoutMs);
    try {
      const res = await this.dispatcher.request({
        origin: this.baseUrl,
        path,
        method,
        signal: controller.signal,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const location = res.headers.location;
      return {
        status: res.statusCode,
        text: await res.body.text(),
        endpoint,
        location: Array.isArray(location) ? location[0] : location,
      };
    } catch (e) {
      throw transportError(endpoint, e, state);
    } finally {
      clearTimeout(timer);
    }
  }
}

function trimUrl(url: string): string {
  return url.replace(/\/+$/, '');
}
