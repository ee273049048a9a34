import type { IncomingMessage, ServerResponse } from 'node:http';

export type FastHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** Exact method + path table for the serving hot path, checked before any framework sees the request. */
export class FastRoutes {
  readonly #byMethod = new Map<string, Map<string, FastHandler>>();

  add(method: string, path: string, handler: FastHandler): this {
    let paths = this.#byMethod.get(method);
    if (paths === undefined) {
      paths = new Map();
      this.#byMethod.set(method, paths);
    }
    if (paths.has(path)) throw new Error(`fast route ${method} ${path} is already registered`);
    paths.set(path, handler);
    return this;
  }

  /** Every registered route as `[method, path]` (for the OpenAPI coverage test). */
  list(): Array<[string, string]> {
    return [...this.#byMethod].flatMap(([method, paths]) =>
      [...paths.keys()].map((p): [string, string] => [method, p]),
    );
  }

  /** The handler for `method` and the path part of `url` (query ignored), if any. */
  match(method: string | undefined, url: string | undefined): FastHandler | undefined {
    if (method === undefined || url === undefined) return undefined;
    const paths = this.#byMethod.get(method);
    if (paths === undefined) return undefined;
    const q = url.indexOf('?');
    return paths.get(q === -1 ? url : url.slice(0, q));
  }
}

/** Every path of a role, written once: discovery, health and the model list (read), raw SGLang generate and both
 * spellings of OpenAI chat and completions (serving, on the fast path). */
export function rolePaths(role: string) {
  return {
    engines: `/${role}/engines`,
    health: `/${role}/health`,
    models: `/${role}/v1/models`,
    generate: `/${role}/generate`,
    chat: [`/${role}/chat/completions`, `/${role}/v1/chat/completions`],
    completions: [`/${role}/completions`, `/${role}/v1/completions`],
    abortRequest: `/${role}/abort_request`,
  };
}

/** Whether `path` is one of `role`'s paths (for the JSON 404 of a role that is not configured). */
export function isRolePath(role: string, path: string): boolean {
  const p = rolePaths(role);
  return [p.engines, p.health, p.models, p.generate, ...p.chat, ...p.completions, p.abortRequest].includes(
    path,
  );
}

export interface CombinedListenerOptions {
  serving: FastRoutes;
  /** Everything else, typically `getRequestListener(app.fetch)` from @hono/node-server. */
  fallback: (req: IncomingMessage, res: ServerResponse) => void;
}

/** A node:http request listener: serving routes first, then the framework. */
export function createCombinedListener(options: CombinedListenerOptions): FastHandler {
  const { serving, fallback } = options;
  return (req, res) => {
    const handler = serving.match(req.method, req.url);
    if (handler !== undefined) handler(req, res);
    else fallback(req, res);
  };
}
