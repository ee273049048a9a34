import type { ServerResponse } from 'node:http';
import {
  AbortRequestSchema,
  DEFAULT_WEIGHT_UPDATE_GROUP,
  DestroyWeightsUpdateGroupRequestSchema,
  FLUSH_CACHE_TEXT,
  InitWeightsUpdateGroupRequestSchema,
  MemoryOccupationRequestSchema,
  PauseGenerationRequestSchema,
  surfaceOf,
  UpdateWeightsFromDiskRequestSchema,
  UpdateWeightsFromDistributedRequestSchema,
  UpdateWeightsFromTensorRequestSchema,
  UpdateWeightVersionRequestSchema,
} from '@uis/sglang-engine';
import type { z } from 'zod';

/** What SGLang's pybase64.b64decode(validate=True) takes. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

import { SimFailure } from './engine.ts';
import { sendEmpty, sendJson, sendText } from './http-util.ts';
import type { Handler, RouteContext } from './route-context.ts';

/** The control endpoints (cache, aborts, pause, memory, weights) by name, as the route table mounts them. */
export function controlHandlers(ctx: RouteContext) {
  const { engine, body, failure } = ctx;
  const flush: Handler = (_req, res) => sendText(res, engine.flushCache() ? 200 : 400, FLUSH_CACHE_TEXT);

  const abort: Handler = async (req, res) => {
    const b = await body(req, res, AbortRequestSchema);
    if (!b) return;
    engine.abort(b.rid, b.abort_all === true);
    sendEmpty(res, 200);
  };

  const pause: Handler = async (req, res) => {
    const b = await body(req, res, PauseGenerationRequestSchema);
    if (!b) return;
    engine.pause(b.mode ?? 'abort');
    sendJson(res, 200, { message: 'Generation paused successfully.', status: 'ok' });
  };

  const resume: Handler = (_req, res) => {
    engine.resumeGeneration();
    sendJson(res, 200, { message: 'Generation continued successfully.', status: 'ok' });
  };

  const memory =
    (release: boolean): Handler =>
    async (req, res) => {
      const b = await body(req, res, MemoryOccupationRequestSchema);
      if (!b) return;
      try {
        if (release) await engine.releaseMemory(b.tags);
        else await engine.resumeMemory(b.tags);
        // FastAPI answers a handler that returns None with 200 and a JSON `null`.
        sendJson(res, 200, null);
      } catch (e) {
        failure(res, e, false);
      }
    };

  return { flush, abort, pause, resume, memory, ...weightHandlers(ctx) };
}

/** The weight endpoints: from disk, the distributed group (init, update, destroy), tensors, the version alone. */
function weightHandlers(ctx: RouteContext) {
  const { engine, body } = ctx;
  const ok = (res: ServerResponse, message: string, extra: Record<string, unknown> = {}) =>
    sendJson(res, 200, { success: true, message, ...extra });
  const notOk = (res: ServerResponse, e: unknown, extra: Record<string, unknown> = {}) => {
    if (!(e instanceof SimFailure)) throw e;
    sendJson(res, 400, { success: false, message: e.message, ...extra });
  };
  const versionNote = (v: string | null | undefined) => (v ? ` Weight version updated to ${v}.` : '');

  /** A weights endpoint: parse the body, make the change, answer `{success: true, message}`; a change the engine
   * refuses is a 400 `{success: false, message}` with the reason, as SGLang answers it. */
  const apply = async <B>(
    res: ServerResponse,
    b: B,
    change: (b: B) => unknown,
    message: (b: B) => string,
    extra: Record<string, unknown> = {},
  ) => {
    try {
      await change(b);
      ok(res, message(b), extra);
    } catch (e) {
      notOk(res, e, extra);
    }
  };
  const weightCall =
    <T extends z.ZodType>(
      schema: T,
      change: (b: z.infer<T>) => unknown,
      message: (b: z.infer<T>) => string,
      extra: Record<string, unknown> = {},
    ): Handler =>
    async (req, res) => {
      const b = await body(req, res, schema);
      if (b) await apply(res, b, change, message, extra);
    };

  const fromDisk = weightCall(
    UpdateWeightsFromDiskRequestSchema,
    (b) => engine.updateWeightsFromDisk(b.model_path, b.weight_version, b.abort_all_requests),
    (b) => `Succeeded to update model weights.${versionNote(b.weight_version)}`,
    { num_paused_requests: 0 },
  );
  const initGroup = weightCall(
    InitWeightsUpdateGroupRequestSchema,
    (b) => engine.initGroup(b.group_name ?? DEFAULT_WEIGHT_UPDATE_GROUP),
    () => 'Succeeded to initialize custom process group.',
  );
  const destroyGroup = weightCall(
    DestroyWeightsUpdateGroupRequestSchema,
    (b) => engine.destroyGroup(b.group_name ?? DEFAULT_WEIGHT_UPDATE_GROUP),
    () => 'Succeeded to destroy custom process group.',
  );
  const fromDistributed = weightCall(
    UpdateWeightsFromDistributedRequestSchema,
    (b) =>
      engine.updateWeightsFromDistributed(
        b.group_name ?? DEFAULT_WEIGHT_UPDATE_GROUP,
        b.names,
        b.weight_version,
        b.abort_all_requests,
      ),
    (b) => `Succeeded to update parameter online.${versionNote(b.weight_version)}`,
  );
  // From 0.5.15 the HTTP layer decodes the payloads (Base64Bytes); before, each TP rank's scheduler does.
  const edgeDecodes =
    surfaceOf(
      ctx.options.simSglangVersion,
    )?.classes.UpdateWeightsFromTensorReqInput?.fields.serialized_named_tensors?.type.includes(
      'Base64Bytes',
    ) ?? false;
  /** update_weights_from_tensor as SGLang takes it: one payload per TP rank, rank r deserializing entry r. */
  const fromTensor: Handler = async (req, res) => {
    const b = await body(req, res, UpdateWeightsFromTensorRequestSchema);
    if (!b) return;
    const payloads = b.serialized_named_tensors;
    const bad = payloads.findIndex((p) => typeof p !== 'string' || !BASE64.test(p));
    if (bad !== -1 && edgeDecodes)
      return sendJson(res, 422, {
        detail: [
          { type: 'value_error', loc: ['body', 'serialized_named_tensors', bad], msg: 'Invalid base64' },
        ],
      });
    // The tokenizer manager asserts a single data-parallel rank; FastAPI answers the AssertionError with a 500.
    if (ctx.options.dpSize > 1) return sendText(res, 500, 'Internal Server Error');
    // A rank whose entry is missing or not base64 raises in the scheduler, which takes the server down.
    const fault =
      payloads.length < ctx.options.tpSize
        ? `IndexError: list index out of range (serialized_named_tensors[${payloads.length}])`
        : bad !== -1
          ? `binascii.Error: serialized_named_tensors[${bad}] is not base64`
          : null;
    if (fault !== null) return engine.crash(`update_weights_from_tensor: ${fault}`);
    await apply(
      res,
      b,
      (x) =>
        engine.updateWeightsFromTensor(
          payloads.length,
          x.weight_version,
          x.abort_all_requests,
          x.flush_cache ?? true,
        ),
      (x) => `Succeeded to update model weights.${versionNote(x.weight_version)}`,
    );
  };

  const weightVersion: Handler = async (req, res) => {
    const b = await body(req, res, UpdateWeightVersionRequestSchema);
    if (!b) return;
    engine.setWeightVersion(b.new_version, b.abort_all_requests);
    ok(res, `Weight version updated to ${b.new_version}`, { new_version: b.new_version });
  };

  return { fromDisk, initGroup, destroyGroup, fromDistributed, fromTensor, weightVersion };
}
