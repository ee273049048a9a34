import {
  type ControlPlane,
  type ControlPlaneOptions,
  createControlPlane,
  InProcessSimLauncher,
} from '@uis/control-plane';
import { deferConfig, layoutRole } from '@uis/manager/testing';
import type { SimOptionsInput } from '@uis/sglang-sim';
import { parseConfig, type UisConfig } from '@uis/spec';
import { afterAll, beforeAll } from 'vitest';
import { UisServer, type UisServerOptions } from '../server/uis-server.ts';

const group = (num_gpus: number, gpus_per_engine: number) => ({
  num_gpus,
  gpus_per_engine,
  tp: gpus_per_engine,
});

/** Test layout: one 8-GPU node split between rollout (two models, 2 replicas each), GenRM and teacher, all
 * resident (no schedule), so every serving path can be exercised at once. */
export function splitTestConfig(): UisConfig {
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: 8 }] },
    training: { actor_gpus: 8, offload_train: true },
    roles: {
      rollout: layoutRole(
        'colocated_split',
        [
          { name: 'policy', weight_source: 'disk', engine_groups: [group(2, 1)] },
          { name: 'policy-code', weight_source: 'disk', engine_groups: [group(2, 1)] },
        ],
        {
          routing: {
            aliases: { actor: 'policy' },
            route_keys: { code: 'policy-code' },
            policy: 'least_outstanding',
          },
        },
      ),
      genrm: layoutRole('colocated_split', {
        name: 'judge',
        weight_source: 'static',
        sampling_defaults: { temperature: 0.5 },
        chat_template_kwargs: { enable_thinking: false },
        engine_groups: [group(2, 2)],
      }),
      teacher: layoutRole(
        'colocated_split',
        {
          name: 'math-teacher',
          model_path: '/models/teacher',
          weight_source: 'static',
          engine_groups: [group(2, 2)],
        },
        { routing: { route_keys: { math: 'math-teacher' } } },
      ),
    },
  });
}

/** Test layout: rollout, GenRM and teacher take turns on one 8-GPU node (colocated defer), as in the demo; the
 * manager's tests run the same layout. */
export function deferTestConfig(): UisConfig {
  return parseConfig(deferConfig());
}

/** One decoupled rollout model `policy` (weights from disk) of `engines` one-GPU engines on one node; `model` adds
 * fields to the model (e.g. max_staleness). The smallest layout is the default: one engine. */
export function singleRolloutConfig(engines = 1, model: Record<string, unknown> = {}): UisConfig {
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: engines }] },
    roles: {
      rollout: layoutRole('decoupled', {
        name: 'policy',
        weight_source: 'disk',
        engine_groups: [group(engines, 1)],
        ...model,
      }),
    },
  });
}

/** An elastic rollout model: `initial` one-GPU replicas started by the plan and `reserved` GPUs held for scale-out
 * (a placeholder group), on one node. */
export function elasticRolloutConfig(initial = 4, reserved = 4): UisConfig {
  return parseConfig({
    cluster: { nodes: [{ name: 'node-0', gpus: initial + reserved }] },
    roles: {
      rollout: layoutRole('decoupled', {
        name: 'policy',
        weight_source: 'disk',
        elastic_enabled: true,
        engine_groups: [group(initial, 1), { worker_type: 'placeholder', ...group(reserved, 1) }],
      }),
    },
  });
}

/** What a test gateway is made of: the layout, the engines' launcher, manager settings and the server's options
 * (its admin token at least). */
export interface GatewayOptions {
  config: UisConfig;
  launcher: NonNullable<ControlPlaneOptions['launcher']>;
  managerOptions?: ControlPlaneOptions['managerOptions'];
  server: Omit<UisServerOptions, 'plane'>;
}

/** A started gateway: the plane, the server in front of it on a free 127.0.0.1 port, and `close()` that stops
 * both (server first). */
export interface StartedGateway {
  plane: ControlPlane;
  server: UisServer;
  url: string;
  close(): Promise<void>;
}

/** Starts a ControlPlane on `opts.launcher` and a UisServer in front of it; what started is stopped again when a
 * later step fails. The launcher's own engines are the caller's to close. */
export async function startGateway(opts: GatewayOptions): Promise<StartedGateway> {
  const plane = await createControlPlane({
    config: opts.config,
    launcher: opts.launcher,
    ...(opts.managerOptions ? { managerOptions: opts.managerOptions } : {}),
  });
  let server: UisServer | undefined;
  try {
    server = new UisServer({ plane, ...opts.server });
    const { url } = await server.listen(0);
    const started = server;
    return {
      plane,
      server,
      url,
      close: async () => {
        await started.close();
        await plane.stop();
      },
    };
  } catch (e) {
    await server?.close();
    await plane.stop();
    throw e;
  }
}

/** A gateway on in-process sims (`sim` sets their options) for the tests of the file or describe block that calls
 * this: started before them (within `startTimeoutMs`, default 60 s), stopped after them with every sim closed.
 * Read `service`, `server` and `url` inside the tests; `launcher` is there from the start. */
export function gatewayOnSims(
  opts: Omit<GatewayOptions, 'launcher'> & { sim?: Partial<SimOptionsInput>; startTimeoutMs?: number },
): {
  readonly launcher: InProcessSimLauncher;
  readonly plane: ControlPlane;
  readonly server: UisServer;
  readonly url: string;
} {
  const launcher = new InProcessSimLauncher(opts.sim);
  let started: StartedGateway | undefined;
  const running = (): StartedGateway => {
    if (!started) throw new Error('the test gateway has not started');
    return started;
  };
  beforeAll(async () => {
    started = await startGateway({ ...opts, launcher });
  }, opts.startTimeoutMs ?? 60_000);
  afterAll(async () => {
    await started?.close();
    await launcher.closeAll();
  });
  return {
    launcher,
    get plane() {
      return running().plane;
    },
    get server() {
      return running().server;
    },
    get url() {
      return running().url;
    },
  };
}
