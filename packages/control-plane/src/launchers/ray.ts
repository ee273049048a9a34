import { type RayHead, type RayRuntime, SIM_BIN, startRayHead, startRayRuntime } from '@uis/manager';
import { type Logger, type PlacementPlan, type RayGatewayConfig, UisError } from '@uis/spec';

/** The Ray runtime of `launcher: ray` (bridge, `RayPlacementGroups`, `RayLauncher`) and the head this run started
 * (none when `gateway.ray.address` names a cluster). */
export interface StartedRay {
  runtime: RayRuntime;
  head: RayHead | null;
  /** Closes the bridge (it stops any actor of ours still running and removes the PGs it created), then the head
   * this run started. After the managers' shutdown. Idempotent. */
  stop(): Promise<void>;
}

/** Starts a local head when no address is configured, then the bridge. Anything started is stopped again if a
 * later step fails; errors name the `gateway.ray` setting to change. */
export async function startRay(
  settings: RayGatewayConfig,
  plan: PlacementPlan,
  logger: Logger,
): Promise<StartedRay> {
  const s = settings;
  let head: RayHead | null = null;
  try {
    let address = s.address;
    if (address === undefined) {
      head = await startRayHead({
        python: s.python,
        ...(s.head?.num_gpus === undefined ? {} : { numGpus: s.head.num_gpus }),
        ...(s.head?.num_cpus === undefined ? {} : { numCpus: s.head.num_cpus }),
      });
      address = head.address;
      logger.info({ address, tempDir: head.tempDir }, 'started a local Ray head');
    }
    const command = s.engine_command ?? (s.engine === 'sim' ? [process.execPath, SIM_BIN] : undefined);
    const runtime = await startRayRuntime({
      plan,
      address,
      namespace: s.namespace,
      python: s.python,
      connectTimeoutMs: s.connect_timeout_s * 1000,
      readyTimeoutS: s.pg_ready_timeout_s,
      host: s.engine_host,
      ...(command ? { command } : {}),
      ...(s.engine_args.length > 0 ? { extraArgs: () => [...s.engine_args] } : {}),
      ...(Object.keys(s.env).length > 0 ? { env: s.env } : {}),
      onLog: (line) => {
        if (/error|exception|traceback/i.test(line)) logger.warn({ line }, 'ray bridge');
      },
    });
    logger.info({ address, ray: runtime.bridge.rayVersion, nodes: runtime.bridge.nodes }, 'connected to Ray');
    const started = head;
    let stopping: Promise<void> | null = null;
    return {
      runtime,
      head: started,
      stop() {
        stopping ??= (async () => {
          try {
            await runtime.close();
          } finally {
            await started?.stop();
          }
        })();
        return stopping;
      },
    };
  } catch (e) {
    await head?.stop();
    throw configPathed(e);
  }
}

/** The bridge names its settings (`address`, `python`); the user wrote them under `gateway.ray`. */
function configPathed(e: unknown): unknown {
  if (!(e instanceof UisError) || (e.path !== 'address' && e.path !== 'python')) return e;
  return new UisError({
    code: e.code,
    relayedStatus: e.status,
    path: `gateway.ray.${e.path}`,
    message: `gateway.ray.${e.path}: ${e.message}`,
    ...(e.details === undefined ? {} : { details: e.details }),
    cause: e,
  });
}
