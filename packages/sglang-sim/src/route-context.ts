import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import type { CompletionsContext } from './completions-route.ts';
import { type SimEngine, SimFailure } from './engine.ts';
import type { Defaults } from './generate.ts';
import { hashString } from './hash.ts';
import { FASTAPI_REFUSAL, readBody, sendOpenAIError, sendSGLangError } from './http-util.ts';
import type { SimOptions } from './options.ts';

/** One route's handler (a plain node:http handler). */
export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** What every route of the head node shares: the engine, its options, request ids, and the common steps (read a
 * body, admit a generation, answer a failure). */
export interface RouteContext extends CompletionsContext {
  options: SimOptions;
  /** A hung engine never answers: the response is left open until the client gives up or the server closes. */
  hang: (res: ServerResponse) => void;
  /** The body parsed by `schema`, or undefined when it already answered (FastAPI's 422 shapes). */
  body: <T extends z.ZodType>(
    req: IncomingMessage,
    res: ServerResponse,
    schema: T,
  ) => Promise<z.infer<T> | undefined>;
}

export function routeContext(engine: SimEngine, options: SimOptions): RouteContext {
  let ridCounter = 0;
  const ridPrefix = hashString(`${process.pid}:${Date.now()}`).toString(16);
  const defaults: Defaults = {
    seed: options.simSeed,
    dpSize: options.dpSize,
    nextRid: () => `${ridPrefix}${(ridCounter++).toString(16).padStart(8, '0')}`,
  };
  const hang = (_res: ServerResponse): void => undefined;
  const created = () => Math.floor(Date.now() / 1000);
  /** SGLang's --stream-interval: one chunk every N tokens (and always the last one). */
  const interval = options.streamInterval;

  const body = <T extends z.ZodType>(req: IncomingMessage, res: ServerResponse, schema: T) =>
    readBody(req, res, schema, FASTAPI_REFUSAL);

  /** The common gate of generation endpoints; returns false when it already answered. A request held by the
   * arrivals fault waits here, before anything registers its rid. */
  async function gate(res: ServerResponse, openai: boolean): Promise<boolean> {
    await engine.arrivals.pass();
    if (engine.status !== 'ready') {
      const msg = `The engine is ${engine.status}.`;
      if (openai) sendOpenAIError(res, 503, msg);
      else sendSGLangError(res, msg, 503);
      return false;
    }
    const a = engine.admit();
    if (a === 'hang') {
      hang(res);
      return false;
    }
    if (a === 'error') {
      const msg = 'Internal server error (injected by --sim-error-rate).';
      if (openai) sendOpenAIError(res, 500, msg);
      else sendSGLangError(res, msg, 500);
      return false;
    }
    return true;
  }

  function failure(res: ServerResponse, e: unknown, openai: boolean): void {
    if (!(e instanceof SimFailure)) throw e;
    engine.countError();
    if (openai) sendOpenAIError(res, e.status, e.message);
    else sendSGLangError(res, e.message, e.status);
  }

  return { engine, options, defaults, interval, created, hang, body, gate, failure };
}
